"""`translate --target-prefix FILE` and `--constraints FILE`: one line per input line.

Bad files are refused in one line, exit status 2, before any backend loads; good ones
give what `Translator` gives for the same prefixes and phrases, and the share of phrases
found is reported on stderr.
"""

import json
import os
import subprocess
import sys

import keras
import pytest
from conftest import BACKEND_INDEPENDENT, small_config

from keras_transformer import Seq2SeqTransformer
from keras_transformer.decoding import Translator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs `keras-transformer translate` and writes which backends it loaded.
WRAPPER = """
import json, sys
from keras_transformer.cli import main
try:
    code = main(sys.argv[2:])
except SystemExit as exit:
    code = exit.code
with open(sys.argv[1], "w") as report:
    json.dump([n for n in ("tensorflow", "jax", "torch", "keras") if n in sys.modules], report)
sys.exit(code)
"""


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    "files, flags, message",
    [
        (
            {"c.txt": "Hund\t\tKatze\n\n"},
            ["--constraints", "c.txt"],
            "--constraints c.txt line 1 has an empty phrase (phrases are separated by one tab)",
        ),
        ({"c.txt": "Hund\n \t\n"}, ["--constraints", "c.txt"], "line 2 has an empty phrase"),
        ({"c.txt": "Hund\t\n\n"}, ["--constraints", "c.txt"], "line 1 has an empty phrase"),
        (
            {"c.txt": "Hund\n"},
            ["--constraints", "c.txt"],
            "--constraints c.txt has 1 lines; --input in.en has 2 (one line per input line)",
        ),
        (
            {"c.txt": "\t".join(["a"] * 17) + "\n\n"},
            ["--constraints", "c.txt"],
            "line 1 has 17 phrases; at most 16 are allowed",
        ),
        (
            {"p.txt": "Der\n\nDie\n"},
            ["--target-prefix", "p.txt"],
            "--target-prefix p.txt has 3 lines; --input in.en has 2",
        ),
        (
            {"p.txt": "Der\n\n", "c.txt": "Hund\n"},
            ["--target-prefix", "p.txt", "--constraints", "c.txt"],
            "--constraints c.txt has 1 lines; --target-prefix p.txt has 2",
        ),
        (
            {"c.txt": "Hund\n\n"},
            ["--constraints", "c.txt", "--search", "greedy"],
            "--constraints needs beam search. Received: --search greedy",
        ),
        ({}, ["--constraints", "absent.txt"], "--constraints absent.txt: The file does not exist"),
    ],
)
def test_bad_target_files_exit_2_in_one_line_before_any_backend(tmp_path, files, flags, message):
    (tmp_path / "in.en").write_text("A dog.\nTwo cats.\n", encoding="utf-8")
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    report = tmp_path / "loaded.json"
    arguments = ["translate", "--model", "absent.keras", "--input", "in.en", *flags]
    result = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(report), *arguments],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        cwd=tmp_path,
        timeout=120,
    )
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert json.loads(report.read_text()) == []
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """A tiny model with a SentencePiece vocabulary, saved as a .keras file."""
    from keras_transformer.export import save_translation_model
    from keras_transformer.synthetic import generate_synthetic_pairs
    from keras_transformer.text import train_vocabulary

    english, german = generate_synthetic_pairs(200, seed=0)
    tokenizer = train_vocabulary(english + german, vocabulary_size=160)
    folder = tmp_path_factory.mktemp("target_files")
    keras.utils.set_random_seed(7)
    model = Seq2SeqTransformer(small_config(160))
    save_translation_model(model, tokenizer, folder / "model.keras")
    sentences = [english[0], english[1], "", english[2]]
    (folder / "test.en").write_text("".join(f"{s}\n" for s in sentences), encoding="utf-8")
    return folder, model, tokenizer, sentences


def test_translate_reads_prefixes_and_constraints_per_line(saved_model, capsys):
    from keras_transformer.commands.translate import main

    folder, model, tokenizer, sentences = saved_model
    prefixes = ["Die Katze", "", "", "Zwei"]
    constraints = [["Hund", "Tisch"], [], ["Lampe"], ["Vogel"]]
    (folder / "prefix.de").write_text("".join(f"{p}\n" for p in prefixes), encoding="utf-8")
    lines = "".join("\t".join(phrases) + "\n" for phrases in constraints)
    (folder / "terms.de").write_text(lines, encoding="utf-8")
    translator = Translator(model, tokenizer, max_extra_length=8)
    expected = translator.translate(
        sentences, verbose=0, target_prefix=prefixes, constraints=constraints
    )
    assert expected[0].startswith("Die Katze") and "Hund" in expected[0]
    flags = [
        "--target-prefix",
        str(folder / "prefix.de"),
        "--constraints",
        str(folder / "terms.de"),
    ]
    arguments = ["--model", str(folder / "model.keras"), "--input", str(folder / "test.en")]
    status = main([*arguments, *flags, "--max-extra-length", "8", "--chunk-size", "3"])
    out, err = capsys.readouterr()
    assert (status, out.splitlines()) == (0, expected), err
    found = sum(p in t for phrases, t in zip(constraints, expected, strict=True) for p in phrases)
    assert f"Constraints: {found} of 4 phrases ({25 * found:.1f}%) appear in the output." in err
    assert found == 3  # the blank line's phrase cannot appear


# The line counts are compared in Python, whatever the backend.
@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    "lines, message",
    [
        (3, "the input has 3 lines, fewer than the 4 of --target-prefix"),
        (5, "the input has more lines than the 4 of --target-prefix"),
    ],
)
def test_a_piped_input_of_another_line_count_exits_2(saved_model, monkeypatch, capsys, lines,
                                                     message):  # fmt: skip
    import io
    import types

    from keras_transformer.commands.translate import main

    folder, _, _, sentences = saved_model
    (folder / "four.de").write_text("Die\n\n\nZwei\n", encoding="utf-8")
    text = "".join(f"{s}\n" for s in (sentences * 2)[:lines]).encode()
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=io.BytesIO(text)))
    output = folder / "piped.de"
    output.write_text("kept\n", encoding="utf-8")
    arguments = ["--model", str(folder / "model.keras"), "--target-prefix", str(folder / "four.de")]
    status = main([*arguments, "--max-extra-length", "2", "--output", str(output)])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and message in err and "left as it was" in err, err
    assert output.read_text(encoding="utf-8") == "kept\n"
