"""Named configurations: the paper's base and big models and every row of Table 3."""

import dataclasses

from keras_transformer.models.transformer_config import TransformerConfig
from keras_transformer.utils.dataclass_config import setting


@dataclasses.dataclass(frozen=True)
class Preset:
    """A model of the paper with the training settings that go with it."""

    name: str = dataclasses.field(metadata={"help": 'Preset name, e.g. "base" or "table3-B1".'})
    description: str = dataclasses.field(
        metadata={"help": "What the paper's row changes relative to the base model."}
    )
    model: dict = dataclasses.field(
        metadata={"help": "TransformerConfig fields that differ from the base defaults."}
    )
    label_smoothing: float = setting(
        0.1, "eps_ls of the label-smoothed loss (5.4; Table 3 row D varies it)."
    )
    train_steps: int = setting(
        100_000, "Training steps (5.2: 100k base, 300k big; Table 3 rows train 100k)."
    )
    warmup_steps: int = setting(4000, "Warmup steps of the learning-rate schedule (5.3).")
    averaged_checkpoints: int = setting(
        5, "Last checkpoints averaged for evaluation (6.1: 5 base, 20 big)."
    )
    paper_params_millions: float | None = setting(
        None,
        'The paper\'s "params x 10^6" column (Table 3), None where the paper leaves it blank.',
    )

    def config(self, vocabulary_size, **overrides):
        """The `TransformerConfig` of this preset for a vocabulary of `vocabulary_size`."""
        return TransformerConfig(vocabulary_size=vocabulary_size, **{**self.model, **overrides})


def _row(name, description, params=None, label_smoothing=0.1, **model):
    return Preset(
        name=name,
        description=description,
        model=model,
        label_smoothing=label_smoothing,
        paper_params_millions=params,
    )


PRESETS = {
    preset.name: preset
    for preset in (
        _row("base", "Base model: N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1", params=65),
        Preset(
            name="big",
            description="Big model: N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3, 300k steps",
            model={"d_model": 1024, "intermediate_dim": 4096, "num_heads": 16, "dropout": 0.3},
            train_steps=300_000,
            averaged_checkpoints=20,
            paper_params_millions=213,
        ),
        # (A): vary the number of heads, keeping computation constant.
        _row("table3-A1", "h=1, d_k=d_v=512", num_heads=1),
        _row("table3-A2", "h=4, d_k=d_v=128", num_heads=4),
        _row("table3-A3", "h=16, d_k=d_v=32", num_heads=16),
        _row("table3-A4", "h=32, d_k=d_v=16", num_heads=32),
        # (B): smaller attention key size; d_v stays 64.
        _row("table3-B1", "d_k=16", params=58, key_dim=16, value_dim=64),
        _row("table3-B2", "d_k=32", params=60, key_dim=32, value_dim=64),
        # (C): bigger and smaller models.
        _row("table3-C1", "N=2", params=36, num_layers=2),
        _row("table3-C2", "N=4", params=50, num_layers=4),
        _row("table3-C3", "N=8", params=80, num_layers=8),
        _row("table3-C4", "d_model=256, d_k=d_v=32", params=28, d_model=256),
        _row("table3-C5", "d_model=1024, d_k=d_v=128", params=168, d_model=1024),
        _row("table3-C6", "d_ff=1024", params=53, intermediate_dim=1024),
        _row("table3-C7", "d_ff=4096", params=90, intermediate_dim=4096),
        # (D): dropout and label smoothing.
        _row("table3-D1", "P_drop=0.0", dropout=0.0),
        _row("table3-D2", "P_drop=0.2", dropout=0.2),
        _row("table3-D3", "eps_ls=0.0", label_smoothing=0.0),
        _row("table3-D4", "eps_ls=0.2", label_smoothing=0.2),
        # (E): learned positional embeddings instead of sinusoids.
        _row("table3-E", "learned positional embedding", position_embedding="learned"),
    )
}


def get_preset(name):
    """Returns the `Preset` called `name`, naming the known ones otherwise."""
    if name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}. Known presets: {', '.join(PRESETS)}.")
    return PRESETS[name]
