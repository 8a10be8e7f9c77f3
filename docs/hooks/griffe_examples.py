"""griffe extension: the package's `Example:` sections, read as Google-style sections.

The docstrings write their doctest examples flush with the `Example:` title, a blank line
between; Google style reads a section's body only when it is indented under the title. This
extension indents the lines after the title, so the API reference shows them as code.
"""

import re

import griffe

_TITLE = re.compile(r"^(Examples?):[ \t]*\n(?:[ \t]*\n)*", re.M)


def indent_examples(text):
    """The docstring `text` with the body of its `Example:` section indented."""
    match = _TITLE.search(text)
    if match is None or text[match.end() :].startswith((" ", "\t")):
        return text
    body = "".join(
        "    " + line if line.strip() else line for line in text[match.end() :].splitlines(True)
    )
    return f"{text[: match.start()]}Examples:\n{body}"


class DoctestExamples(griffe.Extension):
    """Indents the `Example:` body of every docstring griffe reads."""

    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is not None:
            obj.docstring.value = indent_examples(obj.docstring.value)
