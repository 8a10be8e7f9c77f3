"""The scores of one hypothesis file, as `score_files` returns them."""

import dataclasses

# The metrics `score_files` computes, and those it computes by default (here, not in files.py,
# so that the command line offers them without importing sacrebleu and sacremoses).
METRICS = ("bleu", "chrf", "tokenized_bleu", "multi30k_bleu")
DEFAULT_METRICS = ("bleu", "chrf", "tokenized_bleu")


@dataclasses.dataclass(frozen=True)
class EvaluationScores:
    """BLEU variants and chrF of a hypothesis file against its references.

    A metric that was not requested is None. `format()` gives the lines
    the `keras-transformer evaluate` command prints.
    """

    # Number of segments (lines) scored.
    num_segments: int
    # Number of reference sets (one per reference file).
    num_references: int
    # Detokenized cased sacreBLEU (13a): the number to report today (not the paper's).
    bleu: float | None = None
    # sacreBLEU's signature of `bleu`, which must be reported with it.
    bleu_signature: str | None = None
    # chrF (character n-gram F-score, beta 2), detokenized.
    chrf: float | None = None
    # sacreBLEU's signature of `chrf`.
    chrf_signature: str | None = None
    # Moses-tokenized, ##AT##-compound-split BLEU: comparable with the paper's 27.3 / 28.4.
    tokenized_bleu: float | None = None
    # Lowercased Moses-tokenized BLEU: comparable with the Multi30k literature.
    multi30k_bleu: float | None = None

    def format(self):
        """One line per computed metric, scores with 2 decimals.

        Returns:
            str, e.g. "BLEU = 27.31 (nrefs:1|case:mixed|...)\\nchrF = 56.02 (...)".
        """
        lines = []
        if self.bleu is not None:
            lines.append(f"BLEU = {self.bleu:.2f} ({self.bleu_signature})")
        if self.chrf is not None:
            lines.append(f"chrF = {self.chrf:.2f} ({self.chrf_signature})")
        if self.tokenized_bleu is not None:
            lines.append(
                f"tokenized BLEU = {self.tokenized_bleu:.2f} "
                "(Moses-tokenized, compounds split: comparable with the paper)"
            )
        if self.multi30k_bleu is not None:
            lines.append(f"Multi30k BLEU = {self.multi30k_bleu:.2f} (lowercased, Moses-tokenized)")
        return "\n".join(lines)
