"""The hyperparameters of a `Seq2SeqTransformer`, with the paper's base values as defaults."""

import dataclasses

from keras_transformer.utils.dataclass_config import DataclassConfig, setting
from keras_transformer.utils.json_file import read_json_object
from keras_transformer.utils.numeric_settings import check_float

# `attention_initializer` values: Keras' Xavier per projection, or fairseq's fused q/k/v one
# (layers/matrix_glorot_uniform.py); kept here so that a config loads no backend.
ATTENTION_INITIALIZERS = ("glorot_uniform", "xavier_fused_qkv")
POSITION_EMBEDDINGS = ("sinusoidal", "learned")
POSITION_LAYOUTS = ("interleaved", "halves")
POSITION_FREQUENCIES = ("paper", "fairseq")
ACTIVATIONS = ("relu", "swish", "gelu")


@dataclasses.dataclass(frozen=True)
class TransformerConfig(DataclassConfig):
    """Architecture of an encoder-decoder Transformer.

    Defaults are the paper's base model (Table 3, first row); every deviation
    from the paper is a field whose default is the paper's value. Training
    settings (label smoothing, steps) live with the presets, not here.
    """

    # No default: a field made with `setting` needs one.
    vocabulary_size: int = dataclasses.field(
        metadata={
            "help": "Size of the shared source/target subword vocabulary (5.1: about 37k BPE "
            "for en-de)."
        }
    )
    num_layers: int = setting(6, "N: identical layers in the encoder and in the decoder (3.1).")
    d_model: int = setting(
        512, "d_model: width of every sublayer output and of the embeddings (3.1)."
    )
    num_heads: int = setting(8, "h: parallel attention heads (3.2.2).")
    key_dim: int | None = setting(
        None,
        "d_k: query/key size per head; None means d_model // num_heads (3.2.2, Table 3 row B).",
    )
    value_dim: int | None = setting(
        None, "d_v: value size per head; None means d_model // num_heads (3.2.2)."
    )
    intermediate_dim: int = setting(
        2048, "d_ff: inner size of the position-wise feed-forward network (3.3)."
    )
    dropout: float = setting(
        0.1, "P_drop: residual dropout and dropout on embedding + position sums (5.4)."
    )
    attention_dropout: float = setting(0.0, "Dropout on attention weights; not in the paper (0.0).")
    activation_dropout: float = setting(
        0.0, "Dropout after the feed-forward ReLU; not in the paper (0.0)."
    )
    attention_bias: bool = setting(
        False,
        "Biases in the attention projections; the paper's W^Q, W^K, W^V, W^O have none (3.2.2).",
    )
    attention_initializer: str = setting(
        "glorot_uniform",
        "Attention projections' initialization (the paper gives none): glorot_uniform (Xavier "
        "over each (d_model, d_model) projection) or xavier_fused_qkv (W^Q, W^K, W^V drawn as "
        "one (d_model, 3 d_model) Xavier matrix, 1/sqrt(2) the scale, as fairseq does).",
    )
    position_embedding: str = setting(
        "sinusoidal", "Position encoding: sinusoidal (3.5) or learned (Table 3 row E)."
    )
    max_position: int = setting(
        512, "Positions a learned position embedding covers; unused by the sinusoid."
    )
    position_layout: str = setting(
        "interleaved",
        "Sinusoid layout: interleaved (3.5: sin on even features, cos on odd) or halves (all "
        "sines, then all cosines: Marian, fairseq, tensor2tensor).",
    )
    position_frequencies: str = setting(
        "paper",
        "Sinusoid frequencies: paper (10000^(-2i/d_model), 3.5) or fairseq "
        "(exp(-i ln(10000) / (d_model/2 - 1)), i = 0 .. d_model/2 - 1).",
    )
    position_offset: int = setting(
        0, "Position index of the first token: 0 (paper, Marian); fairseq starts at pad_id + 1."
    )
    activation: str = setting(
        "relu",
        "Feed-forward activation: relu (eq. 2), swish (= SiLU, OPUS-MT) or gelu (exact erf form).",
    )
    final_logits_bias: bool = setting(
        False,
        "A learned per-token bias added to the output logits (Marian's final_logits_bias); "
        "the paper's projection has none.",
    )
    share_embeddings: bool = setting(
        True,
        "One embedding matrix for encoder and decoder inputs (3.4); needs one shared vocabulary.",
    )
    tie_output_projection: bool = setting(
        True, "Decoder input embedding reused as the pre-softmax projection (3.4)."
    )
    scale_embeddings: bool = setting(True, "Multiply embeddings by sqrt(d_model) (3.4).")
    normalize_first: bool = setting(
        False, "Pre-LN (x + Sublayer(LN(x)), final LN per stack) instead of the paper's post-LN."
    )
    layer_norm_epsilon: float = setting(
        1e-6, "LayerNorm epsilon; the paper gives none, tensor2tensor used 1e-6."
    )
    pad_id: int = setting(0, "Token id of padding: masked in attention, excluded from the loss.")
    source_eos: bool = setting(
        True,
        "Sources end with the EOS id, as the model was trained (the paper's pipeline, fairseq, "
        "Marian); False for models trained without it (OpenNMT-py). Translation, the "
        "SavedModel and the CTranslate2 export follow it.",
    )
    source_vocabulary_size: int | None = setting(
        None, "Source vocabulary size when embeddings are not shared; None means vocabulary_size."
    )

    @classmethod
    def from_json_file(cls, path):
        """The config in a JSON file: a run's `config.json` (its "model"), the dict of
        `Seq2SeqTransformer.get_config()` (its "config") or a dict of the fields.

        Raises:
            OSError: the file cannot be read.
            ValueError: not JSON, or no valid config in it; the message names the file.
        """
        content = read_json_object(path)
        for key in ("model", "config"):
            if isinstance(content.get(key), dict):
                content = content[key]
                break
        try:
            return cls.from_dict(content)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{path}: {error}") from None

    def __post_init__(self):
        self.check_types()

        def positive_int(name):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")

        for name in ("vocabulary_size", "num_layers", "d_model", "num_heads", "intermediate_dim"):
            positive_int(name)
        for name in ("key_dim", "value_dim", "source_vocabulary_size"):
            if getattr(self, name) is not None:
                positive_int(name)
        if (self.key_dim is None or self.value_dim is None) and self.d_model % self.num_heads:
            raise ValueError(
                "`d_model` must be divisible by `num_heads` when `key_dim` or `value_dim` "
                f"is derived from them. Received: d_model={self.d_model}, "
                f"num_heads={self.num_heads}"
            )
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            rate = getattr(self, name)
            if not 0.0 <= rate < 1.0:
                raise ValueError(f"`{name}` must be in [0, 1). Received: {name}={rate!r}")
        check_float(self.layer_norm_epsilon, "layer_norm_epsilon", above=0.0)
        if self.attention_initializer not in ATTENTION_INITIALIZERS:
            raise ValueError(
                f"`attention_initializer` must be one of {ATTENTION_INITIALIZERS}. "
                f"Received: attention_initializer={self.attention_initializer!r}"
            )
        if self.position_embedding not in POSITION_EMBEDDINGS:
            raise ValueError(
                f"`position_embedding` must be one of {POSITION_EMBEDDINGS}. "
                f"Received: position_embedding={self.position_embedding!r}"
            )
        positive_int("max_position")
        for name, allowed in (
            ("position_layout", POSITION_LAYOUTS),
            ("position_frequencies", POSITION_FREQUENCIES),
            ("activation", ACTIVATIONS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"`{name}` must be one of {allowed}. Received: {name}={getattr(self, name)!r}"
                )
        if self.position_offset < 0:
            raise ValueError(
                "`position_offset` must be a non-negative int. "
                f"Received: position_offset={self.position_offset!r}"
            )
        if self.position_offset and self.position_embedding != "sinusoidal":
            raise ValueError(
                "`position_offset` applies to the sinusoid only; a learned table starts at its "
                f"row 0. Received: position_offset={self.position_offset}, "
                f"position_embedding={self.position_embedding!r}"
            )
        if self.position_frequencies == "fairseq" and self.d_model < 4:
            raise ValueError(
                "`position_frequencies='fairseq'` needs d_model >= 4 (it divides by "
                f"d_model/2 - 1). Received: d_model={self.d_model}"
            )
        if not 0 <= self.pad_id < self.vocabulary_size:
            raise ValueError(
                f"`pad_id` must be a token id in [0, vocabulary_size={self.vocabulary_size}). "
                f"Received: pad_id={self.pad_id!r}"
            )
        if self.share_embeddings and self.source_vocabulary_size not in (
            None,
            self.vocabulary_size,
        ):
            raise ValueError(
                "`share_embeddings=True` needs one vocabulary; set share_embeddings=False for "
                f"a separate source vocabulary. Received: "
                f"source_vocabulary_size={self.source_vocabulary_size}, "
                f"vocabulary_size={self.vocabulary_size}"
            )

    @property
    def head_key_dim(self):
        """d_k actually used."""
        return self.key_dim or self.d_model // self.num_heads

    @property
    def head_value_dim(self):
        """d_v actually used."""
        return self.value_dim or self.d_model // self.num_heads
