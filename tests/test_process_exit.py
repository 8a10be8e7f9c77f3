"""The command-line entry points skip the garbage collections of interpreter shutdown; a
program that only imports the package keeps Python's own exit.

Each case runs in a fresh process whose first exit handler reports, after every other
handler ran (they run last-registered first), whether the objects were frozen and whether a
JSON file the command wrote is whole. `benchmarks/command_exit.py` times the difference.
"""

import os
import subprocess
import sys

import pytest
from conftest import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Registered before the entry point runs, so it runs after the entry point's own handlers.
REPORT_AT_EXIT = """
import atexit, gc, json, os, sys
def report():
    try:
        complete = "bleu" in json.load(open("scores.json"))
    except (OSError, ValueError):
        complete = False
    print(f"frozen={gc.get_freeze_count() > 0} output_complete={complete}")
atexit.register(report)
"""
EVALUATE = ["evaluate", "--hypotheses", "hyp.txt", "--references", "ref.txt", "--json",
            "scores.json"]  # fmt: skip
ENTRY_POINTS = {
    "keras-transformer": "from keras_transformer.cli import main\nsys.exit(main())",
    "python -m keras_transformer": "import runpy\nrunpy.run_module('keras_transformer', "
    "run_name='__main__')",
    "python -m keras_transformer.evaluation": "import runpy\nsys.argv.pop(1)\n"
    "runpy.run_module('keras_transformer.evaluation', run_name='__main__')",
}
IMPORTING_PROGRAM = "import keras_transformer.cli\nimport keras_transformer.experiment.recipes"


def run_entry_point(tmp_path, code, *arguments):
    (tmp_path / "hyp.txt").write_text("the cat sat\non the mat\n")
    (tmp_path / "ref.txt").write_text("the cat sat\non a mat\n")
    result = subprocess.run(
        [sys.executable, "-c", REPORT_AT_EXIT + code, *arguments], cwd=tmp_path,
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT}, timeout=120,
    )  # fmt: skip
    return result


@pytest.mark.parametrize("entry_point", list(ENTRY_POINTS))
def test_commands_freeze_at_exit_after_writing_their_output(tmp_path, entry_point):
    result = run_entry_point(tmp_path, ENTRY_POINTS[entry_point], *EVALUATE)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == "frozen=True output_complete=True", result.stdout


def test_a_recipe_script_freezes_at_exit(tmp_path):
    code = (
        "import runpy\n"
        f"runpy.run_path({os.path.join(ROOT, 'recipes', 'quickstart.py')!r}, "
        "run_name='__main__')"
    )
    result = run_entry_point(tmp_path, code, "--help")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == "frozen=True output_complete=False"


def test_a_program_that_imports_the_package_keeps_pythons_exit(tmp_path):
    result = run_entry_point(tmp_path, IMPORTING_PROGRAM)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == "frozen=False output_complete=False"
