"""Which projections LoRA adapts, and the largest rank each allows (no backend needed)."""

# `--lora-targets`: W^Q and W^V of every attention layer (Hu et al. 2021's choice, the
# default), the four attention projections (W^Q, W^K, W^V, W^O), or the four and both
# feed-forward kernels.
LORA_TARGETS = ("query+value", "attention", "attention+ffn")
DEFAULT_LORA_TARGETS = LORA_TARGETS[0]


def check_lora_targets(targets):
    """Raises ValueError unless `targets` is one of `LORA_TARGETS`."""
    if targets not in LORA_TARGETS:
        raise ValueError(
            f"`targets` must be one of {', '.join(LORA_TARGETS)}. Received: {targets!r}"
        )


def lora_rank_limit(config, targets):
    """The largest LoRA rank every adapted projection of `config` allows.

    A rank-r change `A B` of a (d_in, d_out) matrix has rank at most
    min(d_in, d_out): beyond it the factors only add parameters. The
    attention projections are (d_model, heads * d_k), (d_model, heads * d_v)
    and (heads * d_v, d_model) matrices, each adapted whole; the
    feed-forward kernels are (d_model, d_ff) and (d_ff, d_model).

    Args:
        config: a `TransformerConfig`.
        targets: one of `LORA_TARGETS`.

    Returns:
        int.

    Example:

    >>> lora_rank_limit(TransformerConfig(vocabulary_size=100), "attention")
    512
    """
    check_lora_targets(targets)
    key_dim = config.key_dim or config.d_model // config.num_heads
    value_dim = config.value_dim or config.d_model // config.num_heads
    # W^Q, W^K: (d_model, heads * d_k); W^V and W^O (transposed): (d_model, heads * d_v).
    widths = [config.d_model, config.num_heads * key_dim, config.num_heads * value_dim]
    if targets == "attention+ffn":
        widths.append(min(config.d_model, config.intermediate_dim))
    return min(widths)


def check_lora_rank(rank, config, targets, what="`rank`"):
    """Raises a one-line ValueError unless 1 <= `rank` <= `lora_rank_limit(config, targets)`."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank <= 0:
        raise ValueError(f"{what} must be a positive int. Received: {rank!r}")
    limit = lora_rank_limit(config, targets)
    if rank > limit:
        raise ValueError(
            f"{what} {rank} is above the width of the adapted projections ({targets}: at "
            f"most {limit} for d_model={config.d_model}, {config.num_heads} heads)"
        )
