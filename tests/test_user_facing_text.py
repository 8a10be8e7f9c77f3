"""What a user reads names paths and install commands that work outside the development setup.

The development checkout keeps its corpora in `../shared/data`; users have `data/multi30k`
and the steps of docs/own-data.md. The package is installed once (`pip install .`) and its
extras by name (`pip install 'keras-transformer-mt[EXTRA]'`), with the extras pyproject.toml
defines, in the README, the docs, every recipe's `--help` and every message.
"""

import glob
import os
import re

import pytest
from conftest import BACKEND_INDEPENDENT

from keras_transformer.cli import BACKEND_EXTRAS
from keras_transformer.experiment.recipes import recipe_names, run_recipe
from keras_transformer.pretrained.hub import HUB_EXTRA

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER_TEXT = [
    "README.md",
    "mkdocs.yml",
    "results/README.md",
    *glob.glob("docs/*.md", root_dir=ROOT),
    *glob.glob("keras_transformer/**/*.py", root_dir=ROOT, recursive=True),
    *glob.glob("recipes/*.py", root_dir=ROOT),
]
DEVELOPMENT_PATH = re.compile(r"shared/data|\.\./shared")
PIP_INSTALL = re.compile(r"pip install ((?:-\S+ )*)(\S+)")
# Python's implicit concatenation of string literals split over lines.
LITERAL_BREAK = re.compile(r"\"\s*\n\s*f?\"")
# The extras that messages format in, with their values.
FORMATTED_EXTRAS = {
    "{BACKEND_EXTRAS[backend]}": ",".join(sorted(set(BACKEND_EXTRAS.values()))),
    "{HUB_EXTRA}": HUB_EXTRA,
}
CANONICAL_EXTRAS = re.compile(r"^'keras-transformer-mt\[([A-Za-z0-9_,]+)\]'$")
PLACEHOLDER = "EXTRA"  # docs/index.md's general form


def text_of(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as file:
        text = file.read()
    return LITERAL_BREAK.sub("", text) if path.endswith(".py") else text


def pyproject_extras():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as file:
        return set(tomllib.load(file)["project"]["optional-dependencies"])


@BACKEND_INDEPENDENT
def test_no_development_path():
    found = [
        f"{path}: {line.strip()}"
        for path in USER_TEXT
        for line in text_of(path).splitlines()
        if DEVELOPMENT_PATH.search(line)
    ]
    assert found == []


@BACKEND_INDEPENDENT
@pytest.mark.parametrize("name", recipe_names())
def test_recipe_help_shows_no_development_path(name, capsys):
    with pytest.raises(SystemExit) as stop:
        run_recipe(name, ["--help"], prog="keras-transformer train")
    assert stop.value.code == 0
    help_text = capsys.readouterr().out
    assert "--data-dir" in help_text
    assert not DEVELOPMENT_PATH.search(help_text), help_text


@BACKEND_INDEPENDENT
def test_every_install_hint_is_the_readmes_with_a_known_extra():
    extras = pyproject_extras() | {PLACEHOLDER}
    hints = 0
    for path in USER_TEXT:
        for options, target in PIP_INSTALL.findall(text_of(path)):
            target = target.rstrip('`).,;"')
            for name, value in FORMATTED_EXTRAS.items():
                target = target.replace(name, value)
            if (
                target.startswith(".")
                or "keras-transformer" in target
                or "keras_transformer" in target
            ):
                hints += 1
                assert "-e" not in options.split(), (path, options, target)
                if target == ".":
                    continue
                match = CANONICAL_EXTRAS.match(target)
                assert match, (path, target)
                assert set(match.group(1).split(",")) <= extras, (path, target)
    assert hints >= 10


@BACKEND_INDEPENDENT
def test_the_extras_table_lists_every_extra():
    table = text_of("docs/index.md").split("| Extra | For |", 1)[1].split("\n\n", 1)[0]
    listed = set(re.findall(r"^\| `([a-z0-9_]+)` \|", table, re.MULTILINE))
    assert listed == pyproject_extras()
    readme = text_of("README.md").split("## Install", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"`([a-z0-9_]+)`", readme)) >= pyproject_extras()


@BACKEND_INDEPENDENT
def test_changelog_entries_are_at_most_six_lines():
    entries, current = [], None
    for line in text_of("CHANGELOG.md").splitlines():
        if line.startswith("- "):
            current = [line]
            entries.append(current)
        elif line.startswith("  ") and current is not None:
            current.append(line)
        else:
            current = None
    assert len(entries) > 50
    long = [entry[0] for entry in entries if len(entry) > 6]
    assert long == []
