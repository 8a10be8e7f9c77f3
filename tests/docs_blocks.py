"""The code blocks of README.md and docs/*.md, as tests/test_docs.py runs them.

A page's fenced blocks in ```bash, ```sh, ```console (lines starting with `$ `) and
```python run, in page order, in one working folder per page; any other fence (```text,
```json, ...) is shown only. HTML comments, invisible on the rendered page, steer the test
(docs/contributing.md describes them for writers):

    <!-- not run: REASON -->                  the next block is not run (REASON is required)
    <!-- docs-test: substitute OLD=>NEW -->   every block of the page has OLD replaced by NEW
    <!-- docs-test: slow -->                  the page's test is marked slow (kept out of CI)
    <!-- docs-test: tested by tests/X.py -->  the page's blocks run in another test

NEW may name the test's fixtures: {data} (a folder of tiny generated `{split}.{language}`
files), {run} (a tiny finished training run, copied for the page) and {root} (the checkout).
"""

import dataclasses
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_LANGUAGES = {"bash": "bash", "sh": "bash", "console": "console", "python": "python"}
# Blocks only shown: output, file layouts, configuration.
SHOWN_LANGUAGES = {"text", "json", "yaml", "toml", "ini", "csv", "diff"}
_FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>[\w+-]*)[^\n]*\n(?P<code>.*?)^(?P=indent)```", re.M | re.S
)
_NOT_RUN = re.compile(r"<!--\s*not run:(?P<reason>.*?)-->", re.S)
_DIRECTIVE = re.compile(r"<!--\s*docs-test:\s*(?P<body>.*?)\s*-->", re.S)


@dataclasses.dataclass
class Block:
    """One fenced block: its language, code, first line number and why it is not run."""

    language: str
    code: str
    line: int
    not_run: str | None = None


@dataclasses.dataclass
class Page:
    """A page's blocks and its directives."""

    path: str
    blocks: list
    substitutions: list
    slow: bool = False
    tested_by: str | None = None

    @property
    def name(self):
        return os.path.relpath(self.path, ROOT)

    def runnable(self):
        """The blocks that run, with the page's substitutions applied."""
        blocks = []
        for block in self.blocks:
            if block.language in RUN_LANGUAGES and block.not_run is None:
                code = block.code
                for old, new in self.substitutions:
                    code = code.replace(old, new)
                blocks.append(dataclasses.replace(block, code=code))
        return blocks


def pages():
    """README.md and every docs/*.md, parsed."""
    paths = [os.path.join(ROOT, "README.md")]
    docs = os.path.join(ROOT, "docs")
    paths += sorted(os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md"))
    return [parse_page(path) for path in paths]


def parse_page(path):
    """Reads one page's blocks and directives.

    Raises:
        ValueError: a directive that is not one of the four, or a `not run` without reason.
    """
    with open(path, encoding="utf-8") as file:
        text = file.read()
    page = Page(path=path, blocks=[], substitutions=[])
    previous_end = 0
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        between = text[previous_end : match.start()]
        previous_end = match.end()
        _read_directives(page, between, path)
        not_run = None
        marks = list(_NOT_RUN.finditer(between))
        # The mark must be the last thing before the fence (blank lines allowed).
        if marks and not between[marks[-1].end() :].strip():
            not_run = marks[-1].group("reason").strip()
            if not not_run:
                raise ValueError(f"{path}:{line}: `not run:` needs its reason")
        code = _dedent(match.group("code"), len(match.group("indent")))
        page.blocks.append(Block(match.group("lang").lower(), code, line, not_run))
    _read_directives(page, text[previous_end:], path)
    return page


def _read_directives(page, prose, path):
    """The `docs-test` comments of text outside the fenced blocks."""
    for match in _DIRECTIVE.finditer(prose):
        _apply_directive(page, match.group("body"), path)


def _apply_directive(page, body, path):
    if body == "slow":
        page.slow = True
    elif body.startswith("tested by "):
        page.tested_by = body.removeprefix("tested by ").strip()
    elif body.startswith("substitute ") and "=>" in body:
        old, new = body.removeprefix("substitute ").split("=>", 1)
        page.substitutions.append((old.strip(), new.strip()))
    else:
        raise ValueError(f"{path}: unknown docs-test directive {body!r}")


def _dedent(code, indent):
    lines = code.splitlines(True)
    return "".join(line[indent:] if line[:indent].isspace() else line for line in lines)


def console_commands(code):
    """The commands of a ```console block: its `$ ` lines (with their `\\` continuations)."""
    commands, continuing = [], False
    for line in code.splitlines():
        if line.startswith("$ ") or continuing:
            commands.append(line[2:] if line.startswith("$ ") and not continuing else line)
            continuing = line.rstrip().endswith("\\")
    return "\n".join(commands) + "\n"
