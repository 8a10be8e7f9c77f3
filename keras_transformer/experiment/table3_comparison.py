"""Paper Table 3: variations of the base model, trained alike, compared on dev."""

import os

from keras_transformer.models.presets import PRESETS

# The base row and every Table 3 row, in the paper's order.
TABLE3_VARIANTS = ("base",) + tuple(name for name in PRESETS if name.startswith("table3-"))
_COLUMNS = (
    ("variant", 10), ("N", 2), ("d_model", 7), ("d_ff", 5), ("h", 3), ("d_k", 4), ("d_v", 4),
    ("P_drop", 6), ("eps_ls", 6), ("pos", 10), ("params", 7), ("paper", 6), ("dev PPL", 8),
    ("dev BLEU", 8),
)  # fmt: skip


def run_table3(config, variants=TABLE3_VARIANTS):
    """Trains each variant with `config`'s data and budget; returns one row per variant.

    Each variant writes under `{config.output_dir}/{variant}` and resumes
    there if interrupted. The paper trained every row for 100k steps on
    WMT14 en-de and reports newstest2013 perplexity (per word-piece) and BLEU.

    Args:
        config: an `ExperimentConfig`; its model preset and `output_dir` are set per variant.
        variants: preset names (see `keras_transformer.models.PRESETS`).

    Returns:
        list of dict rows, the columns of `format_table3`.
    """
    from keras_transformer.experiment.run_experiment import run_experiment

    rows = []
    for name in variants:
        if name not in PRESETS:
            raise ValueError(f"Unknown variant {name!r}. Expected some of {list(PRESETS)}.")
        variant = config.replace(
            output_dir=os.path.join(config.output_dir, name),
            model={"preset": name},
            validation={"evaluate_valid": True},
            export=False,
        )
        result = run_experiment(variant)
        model = result.model_config
        preset = PRESETS[name]
        rows.append(
            {
                "variant": name.replace("table3-", ""),
                "N": model["num_layers"],
                "d_model": model["d_model"],
                "d_ff": model["intermediate_dim"],
                "h": model["num_heads"],
                "d_k": model["key_dim"] or model["d_model"] // model["num_heads"],
                "d_v": model["value_dim"] or model["d_model"] // model["num_heads"],
                "P_drop": model["dropout"],
                "eps_ls": variant.label_smoothing(),
                "pos": model["position_embedding"],
                "params": f"{result.num_parameters / 1e6:.1f}M",
                "paper": preset.paper_params_millions or "",
                "dev PPL": f"{result.valid_scores['perplexity']:.2f}",
                "dev BLEU": f"{result.valid_scores['bleu']:.1f}",
            }
        )  # fmt: skip
    return rows


def format_table3(rows):
    """The rows as a text table with the paper's columns."""
    header = " ".join(f"{name:>{width}}" for name, width in _COLUMNS)
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(" ".join(f"{row[name]!s:>{width}}" for name, width in _COLUMNS))
    return "\n".join(lines)


def table3_main(defaults, description, argv=None, prog=None, add_arguments=None):
    """`recipes/table3.py`: the recipes' flags plus `--variants`; prints the table.

    Args:
        defaults: the recipe's `ExperimentConfig`.
        description: `--help` text.
        argv: list of str, or None for `sys.argv[1:]`.
        prog: str or None, the command as typed, for usage and errors.
        add_arguments: callable adding more flags to the parser, or None.

    Returns:
        int, the exit code.
    """
    import sys

    from keras_transformer.experiment.recipe_main import (
        USER_ERRORS,
        check_before_running,
        parse_experiment,
    )
    from keras_transformer.utils.command_line import one_line

    def add_variants(parser):
        parser.add_argument(
            "--variants", nargs="+", default=list(TABLE3_VARIANTS), choices=TABLE3_VARIANTS,
            metavar="VARIANT",
            help=f"Rows to train, among {', '.join(TABLE3_VARIANTS)} (default: all, base first).",
        )  # fmt: skip
        if add_arguments is not None:
            add_arguments(parser)

    parser, arguments, config = parse_experiment(
        defaults, description, argv, prog=prog, add_arguments=add_variants
    )
    # The variants write in subfolders of --output-dir: `run_experiment` checks each.
    check_before_running(parser, config, require_data=True, output_dir=False)
    try:
        rows = run_table3(config, arguments.variants)
    except USER_ERRORS as error:
        print(f"{parser.prog}: error: {one_line(error)}", file=sys.stderr)
        return 2
    print(format_table3(rows))
    return 0
