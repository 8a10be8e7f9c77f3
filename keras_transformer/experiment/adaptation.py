"""Applying a run's `AdaptationConfig` to its `--init-from` model, and writing its adapter."""

import math
import sys

from keras_transformer.export.lora_adapter import save_adapter
from keras_transformer.utils.run_directory import ADAPTER_FILE  # noqa: F401


def part_weights(model, part):
    """The weights of one `--freeze` part of a `Seq2SeqTransformer`."""
    if part == "embeddings":
        layers = [model.target_embedding, model.source_embedding, model.output_projection]
        if model.config.position_embedding == "learned":
            layers += [model.source_position_embedding, model.target_position_embedding]
        weights = [w for layer in layers if layer is not None for w in layer.weights]
        return weights + ([model.logits_bias] if model.logits_bias is not None else [])
    blocks = model.encoder_blocks if part == "encoder" else model.decoder_blocks
    norm = model.encoder_final_norm if part == "encoder" else model.decoder_final_norm
    layers = [*blocks, *([norm] if norm is not None else [])]
    return [w for layer in layers for w in layer.weights]


def adapt_model(model, settings, verbose=1):
    """LoRA adapters on `model`, or parts of it frozen, as `settings` (`AdaptationConfig`) say.

    Prints the trainable and total parameters on stderr (with `verbose`).

    Returns:
        `model`.
    """
    if not settings.active:
        return model
    if settings.lora_rank is not None:
        model.enable_lora(
            settings.lora_rank, targets=settings.lora_targets, alpha=settings.lora_alpha
        )
        what = f"LoRA rank {settings.lora_rank} on {settings.lora_targets}"
    else:
        for part in settings.freeze:
            for variable in part_weights(model, part):
                variable.trainable = False
        what = f"{', '.join(settings.freeze)} frozen"
    if verbose:
        trainable = parameter_count(model.trainable_weights)
        total = parameter_count(model.weights)
        print(
            f"Adapting the model ({what}): {trainable:,} trainable parameters of {total:,} "
            f"({100 * trainable / total:.2f}%).",
            file=sys.stderr,
        )
    return model


def parameter_count(weights):
    """The number of values of `weights`."""
    return int(sum(math.prod(w.shape) for w in weights))


def save_adaptation(model, run, paths):
    """Writes `adapter.lora` of a LoRA run into the `RunDirectory` `run` (records it in `paths`).

    Returns:
        The model without LoRA that `model.keras` holds (the factors merged), or
        `model` itself for other runs.
    """
    if not model.lora_settings:
        return model
    paths["adapter"] = save_adapter(model, run.adapter_path)
    return model.merged_model()
