"""Every shell and Python block of README.md and docs/*.md runs, on tiny generated data.

tests/docs_blocks.py reads the blocks and the pages' `docs-test` comments (the convention is
in docs/contributing.md); tests/docs_runner.py runs one page's blocks in order in a folder
of its own. `keras-transformer` there is this checkout's command, and `train` gets tiny
settings appended (a one-layer width-32 model, 300 pieces, a few steps; the last flag wins),
so a page's training commands run as written in seconds. The folder starts with the tiny
corpus as `{split}.{language}` files, under the split names the docs use.

The pages run under one backend, TensorFlow (their commands start their own processes).
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import BACKEND_INDEPENDENT
from docs_blocks import ROOT, RUN_LANGUAGES, SHOWN_LANGUAGES, pages, parse_page
from process_group import SMALL_MODEL

from keras_transformer.synthetic import write_synthetic_corpus

TESTS = os.path.dirname(os.path.abspath(__file__))
PAGES = pages()
# Appended to every `keras-transformer train`; the Nth one of a page trains 3N steps, so a
# resume (`train --config RUN/config.json`) has steps left to train. A `--print-config` trains
# nothing and is not counted.
TINY_TRAINING = [
    "--vocabulary-size", "300", "--token-budget", "256", "--warmup-steps", "2",
    "--checkpoint-every-steps", "1", "--verbose", "0",
    "--pipeline-override", "bucket_growth=1.5", "--synthetic-sizes", "400", "10", "12",
    *SMALL_MODEL,
]  # fmt: skip
COMMAND_SHIM = f"""#!/usr/bin/env bash
if [ "${{1:-}}" = train ] && [[ " $* " != *" --print-config "* ]]; then
    trained=$(( $(cat .docs-trained 2>/dev/null || echo 0) + 1 ))
    echo "$trained" > .docs-trained
    exec "{sys.executable}" -m keras_transformer "$@" {" ".join(TINY_TRAINING)} \\
        --max-steps $((3 * trained))
fi
exec "{sys.executable}" -m keras_transformer "$@"
"""
# The split names the docs use for Multi30k and WMT14, all copies of the tiny test split.
TEST_SPLIT_NAMES = ("test_2016_flickr", "test_2017_flickr", "newstest2013", "newstest2014")
ON_TENSORFLOW = pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow",
    reason="the pages' commands start their own processes; they run under TensorFlow only",
)


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    data = tmp_path_factory.mktemp("docs_data")
    write_synthetic_corpus(data, train_size=400, valid_size=10, test_size=12, seed=3)
    for name in TEST_SPLIT_NAMES:
        for language in ("en", "de"):
            shutil.copy(data / f"test.{language}", data / f"{name}.{language}")
    for name in ("train", "valid", "test", *TEST_SPLIT_NAMES):  # French: the German text
        shutil.copy(data / f"{name}.de", data / f"{name}.fr")
    return data


def shim_folder(path):
    """A folder for PATH: `keras-transformer` (tiny training) and `python` of this test."""
    path.mkdir()
    (path / "keras-transformer").write_text(COMMAND_SHIM)
    for name in ("python", "python3"):
        (path / name).write_text(f'#!/usr/bin/env bash\nexec "{sys.executable}" "$@"\n')
    for file in path.iterdir():
        file.chmod(0o755)
    return path


def page_environment(shims):
    return {
        **os.environ,
        "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join([ROOT, TESTS]),
        "KERAS_BACKEND": "tensorflow",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "MPLBACKEND": "Agg",
    }


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A finished tiny quickstart-like run (generated corpus): 6 steps, a checkpoint each."""
    work = tmp_path_factory.mktemp("docs_run")
    env = page_environment(shim_folder(work / "bin"))
    (work / ".docs-trained").write_text("1")  # the shim's second training: 6 steps
    command = ["keras-transformer", "train", "--output-dir", "run", "--no-export"]
    subprocess.run(command, cwd=work, env=env, check=True, capture_output=True, timeout=900)
    return work / "run"


def run_page(page, work, request):
    """Runs `page`'s blocks in `work`; returns the runner's output."""
    shims = shim_folder(work / ".bin")
    data = request.getfixturevalue("tiny_data")
    for path in data.iterdir():
        shutil.copy(path, work / path.name)
    values = {"{data}": str(data), "{root}": ROOT}
    if any("{run}" in new for _, new in page.substitutions):
        values["{run}"] = str(work / "run")
        shutil.copytree(request.getfixturevalue("tiny_run"), work / "run")
    blocks = []
    for block in page.runnable():
        code = block.code
        for key, value in values.items():
            code = code.replace(key, value)
        blocks.append({**vars(block), "code": code, "page": page.name})
    (work / ".blocks.json").write_text(json.dumps(blocks))
    result = subprocess.run(
        [sys.executable, os.path.join(TESTS, "docs_runner.py"), ".blocks.json"],
        cwd=work, env=page_environment(shims), capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-6000:])
    return result.stdout


def page_params():
    params = []
    for page in PAGES:
        if page.tested_by or not page.runnable():
            continue
        marks = [pytest.mark.slow] if page.slow else []
        params.append(pytest.param(page, marks=marks, id=page.name))
    return params


@ON_TENSORFLOW
@pytest.mark.parametrize("page", page_params())
def test_the_page_blocks_run(page, tmp_path, request):
    output = run_page(page, tmp_path, request)
    if page.name == os.path.join("docs", "own-data.md"):
        check_own_data_run(tmp_path, output)


def check_own_data_run(work, output):
    """own-data.md leaves the run directory its table describes."""
    run = work / "runs" / "en-de"
    for name in layout_table_names(os.path.join(ROOT, "docs", "own-data.md")):
        if name not in {"data/", "xla_cache/"}:  # only the generated corpus, only JAX
            assert glob.glob(str(run / name.rstrip("/"))), name
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["d_model"] == 32
    assert config["experiment"]["optimization"]["train_steps"] == 6
    assert len(config["command_lines"]) == 2  # the start and the resume with --config
    assert '"format": 1' in output  # the page's `head` of config.json
    assert (run / "train_log.csv").read_text().splitlines()[-1].startswith("6,")
    assert len(glob.glob(str(run / "checkpoints" / "ckpt-*.weights.h5"))) == 6
    # translate gives what the run wrote for the test split, with the same model.
    assert (work / "test.hyp.de").read_text() == (run / "test.de.hyp").read_text()
    assert "BLEU = " in output and "chrF = " in output


def layout_table_names(path):
    """The first column of the page's run directory table, as glob patterns."""
    with open(path, encoding="utf-8") as file:
        table = file.read().split("## The run directory", 1)[1]
    names = []
    for row in table.splitlines()[3:]:
        if row.startswith("|"):
            names += re.findall(r"`([^`]+)`", row.split("|")[1])
    return [name.replace("{test}.{target}", "test.de") for name in names]


@BACKEND_INDEPENDENT
@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_block_is_run_or_shown_and_table_cells_are_short(page):
    for block in page.blocks:
        known = block.language in RUN_LANGUAGES or block.language in SHOWN_LANGUAGES
        assert known, f"{page.name}:{block.line}: fence language {block.language!r} (bash, text...)"
    with open(page.path, encoding="utf-8") as file:
        for line_number, line in enumerate(file, 1):
            if line.startswith("|"):
                longest = max(len(cell.strip()) for cell in line.split("|"))
                assert longest <= 200, f"{page.name}:{line_number}: a table cell of {longest}"


@BACKEND_INDEPENDENT
def test_the_readme_is_short_and_its_links_resolve():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as file:
        readme = file.read()
    assert len(readme.splitlines()) <= 120
    for target in re.findall(r"\]\(((?!https?:)[^)#]+)", readme):
        assert os.path.exists(os.path.join(ROOT, target)), target


@BACKEND_INDEPENDENT
def test_a_not_run_mark_needs_a_reason(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- not run: -->\n```bash\nfalse\n```\n")
    with pytest.raises(ValueError, match="needs its reason"):
        parse_page(str(page))
    page.write_text("<!-- not run: needs a GPU -->\n```bash\nfalse\n```\n\n```python\nx = 1\n```\n")
    blocks = parse_page(str(page)).runnable()
    assert [block.code for block in blocks] == ["x = 1\n"]
