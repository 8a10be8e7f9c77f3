"""Validation, patience, the final model and a diverging run through the recipes' command line."""

import csv
import os

import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, to_numpy

from keras_transformer.checkpoints import average_checkpoints, read_checkpoint_metadata
from keras_transformer.experiment.recipe_main import recipe_main
from keras_transformer.experiment.recipes import load_recipe
from keras_transformer.export import load_translation_model

pytestmark = BACKEND_INDEPENDENT

TINY = load_recipe("quickstart").replace(
    data={"synthetic_sizes": (200, 12, 12), "vocabulary_size": 100, "token_budget": 512},
    model={
        "model_overrides": {"num_layers": 1, "d_model": 32, "num_heads": 2, "intermediate_dim": 64}
    },
    optimization={"warmup_steps": 4},
    checkpoint={"checkpoint_every_steps": 2, "average_last": 2},
    validation={
        "validate_every_steps": None,  # at each checkpoint
        "metrics": ("bleu",),
        "valid_max_sentences": 6,
    },
    decoding={"max_extra_length": 4},
    export=False,
    log_every_steps=2,
)


def test_patience_stops_a_real_run_cleanly_and_the_best_is_the_final_model(tmp_path, capsys):
    # Rate x1e-7: the weights barely move, so valid BLEU never beats the first validation's
    # (a tie is no improvement): patience 2 ends the run at the third validation, step 6.
    output = tmp_path / "run"
    code = recipe_main(
        TINY.replace(output_dir=str(output)),
        "test",
        argv=["--max-steps", "40", "--learning-rate-scale", "1e-7", "--patience", "2",
              "--final-model", "best"],
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    with open(output / "valid_log.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    assert [row["step"] for row in rows] == ["2", "4", "6"]
    assert [row["best_step"] for row in rows] == ["2", "2", "2"]
    assert "Stopping early at step 6: no better valid bleu in 2 validations" in captured.err
    best = output / "checkpoints" / "best.weights.h5"
    assert read_checkpoint_metadata(best)["step"] == 2
    # The final averaging / evaluation still ran, on the best checkpoint (--final-model best).
    assert f"Final model: {best}" in captured.err
    assert (output / "scores.json").is_file()
    saved = load_translation_model(str(output / "model.keras"))[0]
    reference = load_translation_model(str(output / "model.keras"))[0]
    average_checkpoints(reference, [str(best)])
    for got, want in zip(saved.weights, reference.weights, strict=True):
        np.testing.assert_array_equal(to_numpy(got), to_numpy(want))
    # Progress went to stderr, one line per 2 steps; stdout holds only the summary.
    assert [line for line in captured.err.splitlines() if line.startswith("step ")] == [
        line for line in captured.err.splitlines() if line.startswith("step ") and "/40 " in line
    ]
    assert sum(line.startswith("step ") for line in captured.err.splitlines()) == 3
    assert "step 2/40" not in captured.out and "Epoch" not in captured.out + captured.err
    assert captured.out.rstrip().endswith("minutes.")


def test_a_diverging_run_ends_with_one_line_naming_the_step_and_checkpoint(tmp_path, capsys):
    output = tmp_path / "run"
    code = recipe_main(
        TINY.replace(output_dir=str(output)),
        "test",
        argv=["--max-steps", "20", "--learning-rate-scale", "1e30", "--no-validate"],
        prog="quickstart",
    )
    err = capsys.readouterr().err
    assert code == 1
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in err, err[-3000:]
    assert errors[0].startswith("quickstart: error: Non-finite training loss")
    assert "step 2" in errors[0]
    # Nothing non-finite was saved: the loss is NaN from the first update on.
    assert "last good checkpoint: none" in errors[0].lower()
    assert not any(name.startswith("ckpt-") for name in os.listdir(output / "checkpoints"))


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--final-model", "best", "--no-validate"], "final_model='best' needs validate=True"),
        (["--best-metric", "bleu", "--valid-max-sentences", "0"], "valid_max_sentences=0"),
        (["--validate-every-steps", "0"], "validate_every_steps"),
    ],
)
def test_contradictory_validation_flags_are_one_line(tmp_path, capsys, flags, message):
    try:
        code = recipe_main(TINY.replace(output_dir=str(tmp_path / "run")), "test", argv=flags)
    except SystemExit as exit_info:  # found by the command line, before the run starts
        code = exit_info.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err[-2000:]
