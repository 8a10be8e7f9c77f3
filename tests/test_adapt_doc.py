"""docs/adapt.md's commands, on a tiny random Marian folder and the tiny generated corpus.

The page's blocks run in order (tests/docs_runner.py) with `opus-mt-en-de`, a tiny random
OPUS-MT-like model written by transformers' `save_pretrained` (as for docs/pretrained.md),
in place of the download; `train` gets a few steps appended. Then the files the page
describes are checked: the merged model and the adapter, both translations, the exports.
"""

import json
import os
import subprocess
import sys

import pytest
from docs_blocks import ROOT, parse_page

from keras_transformer.synthetic import write_synthetic_corpus
from keras_transformer.text import read_lines

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("subword_nmt")

from test_pretrained_doc import ON_TENSORFLOW, environment, write_marian_folder

PAGE = os.path.join(ROOT, "docs", "adapt.md")
TESTS = os.path.dirname(os.path.abspath(__file__))


@ON_TENSORFLOW
@pytest.mark.slow  # eight commands, each starting TensorFlow, two of them training: minutes
def test_the_page_runs_on_a_tiny_published_model(tmp_path):
    work, data = tmp_path / "page", tmp_path / "data"
    work.mkdir()
    write_synthetic_corpus(data, train_size=300, valid_size=10, test_size=12, seed=3)
    (work / "test.en").write_bytes((data / "test.en").read_bytes())
    write_marian_folder(work / "opus-mt-en-de")
    page = parse_page(PAGE)
    assert page.tested_by == "tests/test_adapt_doc.py"
    blocks = []
    for block in page.runnable():
        code = block.code.replace("{data}", str(data))  # the page's substitution's value
        blocks.append({**vars(block), "code": code, "page": "docs/adapt.md"})
    assert [block["language"] for block in blocks] == ["bash"] * 5
    (work / ".blocks.json").write_text(json.dumps(blocks))
    result = subprocess.run(
        [sys.executable, os.path.join(TESTS, "docs_runner.py"), ".blocks.json"],
        cwd=work, env=environment(work), capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-6000:])
    run = work / "runs" / "my-domain-lora"
    assert (run / "adapter.lora").is_file() and (run / "model.keras").is_file()
    merged, adapted = read_lines(work / "test.merged.de"), read_lines(work / "test.adapter.de")
    assert len(merged) == 12 and merged == adapted
    assert (work / "serving" / "my-domain" / "1" / "saved_model.pb").is_file()
    ct2 = work / "serving" / "my-domain-ct2" / "model.bin"
    assert (
        ct2.read_bytes() == (work / "serving" / "my-domain-ct2-adapter" / "model.bin").read_bytes()
    )
    settings = json.loads((work / "runs" / "my-domain-decoder" / "config.json").read_text())
    assert settings["experiment"]["adaptation"]["freeze"] == ["embeddings", "encoder"]
