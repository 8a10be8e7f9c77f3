"""`TranslationWriter`: the n-best lists of `keras-transformer translate`, as text, tsv or jsonl."""

import json
import math

# The output formats of `translate --format`.
FORMATS = ("text", "tsv", "jsonl")


def _score(score):
    return score if math.isfinite(score) else None


class TranslationWriter:
    """Formats one chunk's n-best lists, writes them to a binary stream, then flushes.

    Every input line gives one output line (`text`, `jsonl`) or one line per
    hypothesis (`tsv`, and `text` with several results): a translation's line
    breaks are written as spaces, and `line_breaks` counts them.

    Args:
        stream: a binary file object.
        output_format: one of `FORMATS`.

    Example:

    >>> writer = TranslationWriter(sys.stdout.buffer, "tsv")
    >>> writer.write([[("Ein Hund rennt.", -1.25)]])
    1	1	-1.250000	Ein Hund rennt.
    """

    def __init__(self, stream, output_format):
        self.stream = stream
        self.format = output_format
        self.lines = 0
        self.line_breaks = 0

    def _one_line(self, text):
        if "\n" in text or "\r" in text:
            self.line_breaks += 1
            text = text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")
        return text

    def write(self, n_best):
        """Writes the hypotheses `[[(text, score), ...], ...]` of consecutive input lines."""
        out = []
        for hypotheses in n_best:
            self.lines += 1
            if self.format == "jsonl":
                record = {
                    "line": self.lines,
                    "translation": hypotheses[0][0],
                    "score": _score(hypotheses[0][1]),
                    "n_best": [{"translation": t, "score": _score(s)} for t, s in hypotheses],
                }
                out.append(json.dumps(record, ensure_ascii=False, allow_nan=False))
                continue
            for rank, (text, score) in enumerate(hypotheses, start=1):
                text = self._one_line(text)
                out.append(
                    text if self.format == "text" else f"{self.lines}\t{rank}\t{score:.6f}\t{text}"
                )
        self.stream.write("".join(f"{line}\n" for line in out).encode("utf-8"))
        self.stream.flush()
