"""How a run adapts its `--init-from` model: LoRA adapters, or parts of the model frozen."""

import dataclasses

from keras_transformer.experiment.settings.config_checks import check_choices
from keras_transformer.models.lora_targets import (
    DEFAULT_LORA_TARGETS,
    LORA_TARGETS,
    check_lora_rank,
)
from keras_transformer.utils.dataclass_config import DataclassConfig, setting

# `--freeze`: the token (and learned position) embeddings with the output projection, the
# encoder (its blocks and final norm), the decoder (its blocks and final norm).
FREEZE_PARTS = ("embeddings", "encoder", "decoder")


@dataclasses.dataclass(frozen=True)
class AdaptationConfig(DataclassConfig):
    """Fine-tuning a model file (`init_from`) all of it (the default), through LoRA
    adapters (`lora_rank`), or with parts of it frozen (`freeze`).

    Example:

    >>> AdaptationConfig(lora_rank=8, lora_targets="attention+ffn").lora_targets
    'attention+ffn'
    """

    lora_rank: int | None = setting(
        None,
        "Train LoRA adapters of this rank (Keras' enable_lora) on the --init-from model, "
        "all of its weights frozen; the run writes the merged model (model.keras) and the "
        "adapters alone (adapter.lora, for translate --adapter). Each adapted projection "
        "gets a change of this rank as a whole matrix; at most its width (d_model).",
        metavar="R",
    )
    lora_targets: str = setting(
        DEFAULT_LORA_TARGETS,
        "The projections LoRA adapts: query+value (W^Q and W^V of every attention layer, "
        "the LoRA paper's choice), attention (W^Q, W^K, W^V and W^O) or attention+ffn (the "
        "four and both feed-forward kernels).",
        choices=LORA_TARGETS,
    )
    lora_alpha: float | None = setting(
        None,
        "LoRA's scale numerator: the change is (alpha / rank) A B; none means the rank (scale 1).",
        metavar="ALPHA",
    )
    freeze: tuple[str, ...] = setting(
        (),
        f"Parts of the --init-from model kept as they are ({', '.join(FREEZE_PARTS)}): "
        "partial fine-tuning; the rest trains.",
        choices=FREEZE_PARTS,
        metavar="PART",
    )

    def __post_init__(self):
        self.check_types()
        check_choices(self, lora_targets=LORA_TARGETS)
        for part in self.freeze:
            if part not in FREEZE_PARTS:
                raise ValueError(
                    f"`freeze` parts must be among {', '.join(FREEZE_PARTS)}. Received: {part!r}"
                )
        if self.lora_rank is not None and self.lora_rank <= 0:
            raise ValueError(f"`lora_rank` must be >= 1. Received: lora_rank={self.lora_rank}")
        if self.lora_alpha is not None and not self.lora_alpha > 0:
            raise ValueError(f"`lora_alpha` must be > 0. Received: lora_alpha={self.lora_alpha}")
        if self.lora_rank is None and self.lora_alpha is not None:
            raise ValueError("`lora_alpha` scales LoRA adapters: give `lora_rank` too.")
        if self.lora_rank is None and self.lora_targets != DEFAULT_LORA_TARGETS:
            raise ValueError("`lora_targets` chooses where LoRA adapters go: give `lora_rank` too.")
        if self.lora_rank is not None and self.freeze:
            raise ValueError(
                "`freeze` with `lora_rank`: LoRA freezes the whole model already. "
                f"Received: freeze={list(self.freeze)}"
            )

    @property
    def active(self):
        """Whether the run adapts its model otherwise than by training all of it."""
        return self.lora_rank is not None or bool(self.freeze)

    def check_model(self, model_config):
        """Raises a one-line ValueError when `lora_rank` exceeds `model_config`'s widths."""
        if self.lora_rank is not None:
            check_lora_rank(self.lora_rank, model_config, self.lora_targets, what="--lora-rank")
