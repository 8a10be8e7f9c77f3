"""The weight quantizations the package decodes with; importing it loads no backend."""

# `quantize_model`'s modes, the choices of the `quantize` decoding setting: "int8" is Keras'
# `model.quantize("int8")` (int8 kernels with one scale per output channel, int8 matmuls).
QUANTIZE_MODES = ("int8",)
