"""docs/own-data.md's commands, run as they are written, on small generated files.

Every ```bash block of the page runs, in order, in one bash script with `set -e`.
`DATA` and `RUN` point at temporary folders (the page keeps variables already set),
and `keras-transformer` is a shell function that runs this checkout's command; for
`train` it appends tiny settings (a one-layer width-32 model, 300 pieces, a few steps),
which win over the page's because the last flag wins.
"""

import glob
import json
import os
import re
import subprocess
import sys

import keras
import pytest
from process_group import SMALL_MODEL

from keras_transformer.text import write_synthetic_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "own-data.md")
# Appended to the page's `train` commands; $TRAINED counts them, so a resume trains longer.
TINY_TRAINING = [
    "--vocabulary-size", "300", "--token-budget", "256", "--warmup-steps", "2",
    "--checkpoint-every-steps", "1", "--verbose", "0",
    "--pipeline-override", "bucket_growth=1.5", *SMALL_MODEL,
]  # fmt: skip
SHIM = f"""\
TRAINED=0
keras-transformer() {{
    if [ "$1" = train ]; then
        TRAINED=$((TRAINED + 1))
        "{sys.executable}" -m keras_transformer "$@" {" ".join(TINY_TRAINING)} \\
            --max-steps $((3 * TRAINED))
    else
        "{sys.executable}" -m keras_transformer "$@"
    fi
}}
"""


def page_commands():
    with open(PAGE, encoding="utf-8") as file:
        return re.findall(r"^```bash\n(.*?)^```", file.read(), flags=re.S | re.M)


def layout_table_names():
    """The first column of the page's run directory table, as glob patterns."""
    with open(PAGE, encoding="utf-8") as file:
        table = file.read().split("## The run directory", 1)[1]
    names = []
    for row in table.splitlines()[3:]:
        first = row.split("|")[1]
        names += re.findall(r"`([^`]+)`", first)
    return [name.replace("{test}.{target}", "test.de") for name in names]


# About eight command processes (each imports TensorFlow) and a training run: over a
# minute of CPU, so kept out of CI.
@pytest.mark.slow
@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="the commands run in their own processes on the default backend",
)
def test_the_page_commands_run_and_leave_the_documented_run_directory(tmp_path):
    blocks = page_commands()
    assert len(blocks) >= 7 and "keras-transformer train" in blocks[1]
    data, run = tmp_path / "data", tmp_path / "run"
    write_synthetic_corpus(data, train_size=400, valid_size=10, test_size=12, seed=3)
    env = {
        **os.environ,
        "DATA": str(data),
        "RUN": str(run),
        "PYTHONPATH": ROOT,
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    script = "set -euo pipefail\n" + SHIM + "\n".join(blocks)
    result = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800
    )
    assert result.returncode == 0, result.stderr[-4000:]

    # Every file of the layout table, except those written only in other set-ups.
    conditional = {"data/", "xla_cache/"}
    for name in layout_table_names():
        if name not in conditional:
            assert glob.glob(str(run / name.rstrip("/"))), name
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["d_model"] == 32 and config["experiment"]["train_steps"] == 6
    assert len(config["command_lines"]) == 2  # the start and the resume with --config
    assert {"python", "keras", "tensorflow"} <= set(config["versions"])
    assert '"format": 1' in result.stdout  # the page's `head` of config.json
    # The resume trained on to step 6: the log's last row and six checkpoints.
    assert (run / "train_log.csv").read_text().splitlines()[-1].startswith("6,")
    assert len(glob.glob(str(run / "checkpoints" / "ckpt-*.weights.h5"))) == 6
    # translate gives what the run wrote for the test split, with the same model.
    assert (tmp_path / "test.hyp.de").read_text() == (run / "test.de.hyp").read_text()
    assert "BLEU = " in result.stdout and "chrF = " in result.stdout
    assert (run / "averaged.weights.h5").is_file()
    assert (tmp_path / "serving" / "en-de" / "1" / "saved_model.pb").is_file()
