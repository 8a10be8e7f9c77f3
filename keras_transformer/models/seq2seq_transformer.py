"""The encoder-decoder Transformer of paper section 3 as a `keras.Model`."""

import contextlib
import warnings

import keras
from keras import ops

from keras_transformer import backend
from keras_transformer.layers.decoding_cache import DecodingCache
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.kernel_matmul import dense_matmul
from keras_transformer.layers.layer_normalization import LayerNormalization
from keras_transformer.layers.learned_position_embedding import LearnedPositionEmbedding
from keras_transformer.layers.masks import padding_mask
from keras_transformer.layers.multi_head_attention import MultiHeadAttention
from keras_transformer.layers.sinusoidal_position_embedding import SinusoidalPositionEmbedding
from keras_transformer.layers.token_embedding import TokenEmbedding
from keras_transformer.layers.transformer_decoder_block import TransformerDecoderBlock
from keras_transformer.layers.transformer_encoder_block import TransformerEncoderBlock
from keras_transformer.models.lora import enable_model_lora, merged_weight_values
from keras_transformer.models.lora_targets import DEFAULT_LORA_TARGETS
from keras_transformer.models.presets import get_preset
from keras_transformer.models.transformer_config import TransformerConfig

INPUT_KEYS = ("encoder_token_ids", "decoder_token_ids")


@keras.saving.register_keras_serializable(package="keras_transformer")
class Seq2SeqTransformer(keras.Model):
    """Encoder-decoder Transformer for sequence-to-sequence tasks (paper 3).

    Token ids are embedded with one matrix shared by source, target and the
    pre-softmax projection and scaled by `sqrt(d_model)` (3.4), added to
    sinusoidal position encodings (3.5) and dropped out (5.4), then run
    through `N` encoder and `N` decoder blocks (3.1). The decoder input is the
    target shifted right (it starts with a begin token); the output is
    float32 logits for the next token at every position. The options of
    published models (`TransformerConfig`: sinusoid layout, frequencies and
    offset, activation, `final_logits_bias`, a learned bias added to the
    logits) default to the paper's choices.

    Besides the teacher-forced `call`, `encode` and a one-step `decode` with a
    key/value cache serve incremental decoding (beam search).

    Args:
        config: a `TransformerConfig` (or its dict form).
        decoder_self_attention: the class of the decoder's masked
            self-attention (or its registered name), a
            `keras_transformer.layers.CachedAttention` subclass keeping its
            cache contract; see `TransformerDecoderBlock`. `None` (default):
            the paper's `MultiHeadAttention`.
        **kwargs: base `keras.Model` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: dict with `"encoder_token_ids"` (batch, source_length) and
            `"decoder_token_ids"` (batch, target_length), integer, padded
            with `config.pad_id`.
        training: bool. Enables dropout.

    Returns:
        float32 logits, (batch, target_length, vocabulary_size).

    Example:

    >>> model = Seq2SeqTransformer.from_architecture("base", vocabulary_size=37000)
    >>> model.compile(optimizer=keras_transformer.training.paper_optimizer(512),
    ...               loss=keras_transformer.training.LabelSmoothedCrossEntropy())
    >>> model.fit(dataset)  # ({"encoder_token_ids", "decoder_token_ids"}, labels)
    """

    def __init__(self, config, decoder_self_attention=None, **kwargs):
        kwargs.setdefault("name", "seq2seq_transformer")
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = TransformerConfig.from_dict(config)
        if not isinstance(config, TransformerConfig):
            raise TypeError(
                "`config` must be a TransformerConfig or a dict of its fields. "
                f"Received: config of type {type(config).__name__}"
            )
        self.config = config
        c = config
        policy = self.dtype_policy

        self.target_embedding = TokenEmbedding(
            c.vocabulary_size,
            c.d_model,
            scale=c.scale_embeddings,
            dtype=policy,
            name="token_embedding",
        )
        if c.share_embeddings:
            self.source_embedding = self.target_embedding
        else:
            self.source_embedding = TokenEmbedding(
                c.source_vocabulary_size or c.vocabulary_size,
                c.d_model,
                scale=c.scale_embeddings,
                dtype=policy,
                name="source_token_embedding",
            )
        if c.tie_output_projection:
            self.output_projection = None
        else:
            self.output_projection = keras.layers.Dense(
                c.vocabulary_size, use_bias=False, dtype=policy, name="output_projection"
            )

        def position_embedding(name):
            if c.position_embedding == "learned":
                return LearnedPositionEmbedding(c.max_position, dtype=policy, name=name)
            return SinusoidalPositionEmbedding(
                layout=c.position_layout,
                frequencies=c.position_frequencies,
                offset=c.position_offset,
                dtype=policy,
                name=name,
            )

        # The sinusoid has no weights; learned positions are separate per stack.
        self.source_position_embedding = position_embedding("source_position_embedding")
        self.target_position_embedding = position_embedding("target_position_embedding")
        self.source_dropout = Dropout(c.dropout, dtype=policy)
        self.target_dropout = Dropout(c.dropout, dtype=policy)

        block_args = {
            "num_heads": c.num_heads,
            "key_dim": c.head_key_dim,
            "value_dim": c.head_value_dim,
            "intermediate_dim": c.intermediate_dim,
            "dropout": c.dropout,
            "attention_dropout": c.attention_dropout,
            "attention_bias": c.attention_bias,
            "attention_initializer": c.attention_initializer,
            "activation_dropout": c.activation_dropout,
            "activation": c.activation,
            "normalize_first": c.normalize_first,
            "layer_norm_epsilon": c.layer_norm_epsilon,
            "dtype": policy,
        }
        self.encoder_blocks = [
            TransformerEncoderBlock(**block_args, name=f"encoder_block_{i}")
            for i in range(c.num_layers)
        ]
        self.decoder_blocks = [
            TransformerDecoderBlock(
                **block_args, self_attention=decoder_self_attention, name=f"decoder_block_{i}"
            )
            for i in range(c.num_layers)
        ]
        self.encoder_final_norm = self.decoder_final_norm = None
        if c.normalize_first:
            # Pre-LN leaves the residual stream unnormalized: close each stack with a LayerNorm.
            self.encoder_final_norm = LayerNormalization(
                epsilon=c.layer_norm_epsilon, dtype=policy, name="encoder_final_norm"
            )
            self.decoder_final_norm = LayerNormalization(
                epsilon=c.layer_norm_epsilon, dtype=policy, name="decoder_final_norm"
            )
        # `final_logits_bias`: a (vocabulary_size,) weight added to the logits, made in `build`.
        self.logits_bias = None
        # `enable_lora`'s settings: {"rank", "alpha", "targets"}, or None.
        self.lora_settings = None

    @classmethod
    def from_architecture(cls, name, vocabulary_size, **overrides):
        """An untrained model of the paper's architecture `name` ("base", "big", "table3-B1").

        The names are `keras_transformer.models.PRESETS` (`keras-transformer recipes`
        lists them). A trained model loads with `keras_transformer.load_translator`
        (a file, a run, a published model) or `load_translation_model`.

        Args:
            name: str, a preset name.
            vocabulary_size: int, the shared vocabulary's size.
            **overrides: `TransformerConfig` fields changed from the preset's.

        Returns:
            A `Seq2SeqTransformer` with fresh weights.

        Example:

        >>> model = Seq2SeqTransformer.from_architecture("base", vocabulary_size=37000)
        """
        return cls(get_preset(name).config(vocabulary_size, **overrides))

    @classmethod
    def from_preset(cls, name, vocabulary_size, **overrides):
        """Deprecated: `from_architecture`, which this calls, under its former name.

        keras-hub's `from_preset` loads trained weights; this one built an untrained
        model, hence the new name.
        """
        warnings.warn(
            "Seq2SeqTransformer.from_preset builds an untrained model (keras-hub's from_preset "
            "loads weights); call from_architecture, or keras_transformer.load_translator for "
            "a trained one. from_preset will be removed.",
            DeprecationWarning,
            stacklevel=2,
        )
        return cls.from_architecture(name, vocabulary_size, **overrides)

    def build(self, input_shape=None):
        sequence_shape = (None, None, self.config.d_model)

        def build(layer, *shapes):
            # Sublayers already called (hence built) keep their weights; the
            # shared embedding appears twice.
            if layer is not None and not layer.built:
                layer.build(*shapes)

        build(self.target_embedding)
        build(self.source_embedding)
        build(self.source_position_embedding, sequence_shape)
        build(self.target_position_embedding, sequence_shape)
        for block in self.encoder_blocks:
            build(block, sequence_shape)
        for block in self.decoder_blocks:
            build(block, sequence_shape, sequence_shape)
        build(self.encoder_final_norm, sequence_shape)
        build(self.decoder_final_norm, sequence_shape)
        build(self.output_projection, sequence_shape)
        if self.config.final_logits_bias and self.logits_bias is None:
            # float32 like the logits, never cast to a mixed policy's compute dtype.
            self.logits_bias = self.add_weight(
                shape=(self.config.vocabulary_size,),
                initializer="zeros",
                autocast=False,
                name="final_logits_bias",
            )
        self.built = True

    def _ensure_built(self):
        # `encode`/`decode` may be the first use of a fresh model (decoding a
        # model whose weights are loaded next); Keras only builds on `__call__`.
        if not self.built:
            self.build()

    def make_train_function(self, force=False):
        backend.build_before_tracing(self)  # one trace of the step on TensorFlow, not two
        return super().make_train_function(force)

    def call(self, inputs, training=None):
        encoder_token_ids, decoder_token_ids = self._check_inputs(inputs)
        encoder_outputs = self.encode(encoder_token_ids, training=training)
        return self.decode_sequence(
            decoder_token_ids,
            encoder_outputs,
            padding_mask(encoder_token_ids, self.config.pad_id),
            training=training,
        )

    def encode(self, encoder_token_ids, training=None, return_attention_scores=False):
        """Runs the encoder stack.

        Args:
            encoder_token_ids: int (batch, source_length), padded with `pad_id`.
            training: bool. Enables dropout.
            return_attention_scores: bool. Also return each block's
                self-attention weights.

        Returns:
            (batch, source_length, d_model) encoder outputs, and a list of
            (batch, heads, source_length, source_length) weights when asked.
        """
        self._ensure_built()
        mask = padding_mask(encoder_token_ids, self.config.pad_id)  # (batch, source_length)
        sequence = self.source_embedding(encoder_token_ids)
        sequence = sequence + self.source_position_embedding(sequence)
        sequence = self.source_dropout(sequence, training=training)
        scores = []
        for block in self.encoder_blocks:
            sequence = block(
                sequence,
                padding_mask=mask,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            if return_attention_scores:
                sequence, weights = sequence
                scores.append(weights)
        if self.encoder_final_norm is not None:
            sequence = self.encoder_final_norm(sequence)
        return (sequence, scores) if return_attention_scores else sequence

    def _embed_target(self, decoder_token_ids, start_index=0, training=None):
        sequence = self.target_embedding(decoder_token_ids)
        sequence = sequence + self.target_position_embedding(sequence, start_index=start_index)
        return self.target_dropout(sequence, training=training)

    def _logits(self, sequence):
        if self.decoder_final_norm is not None:
            sequence = self.decoder_final_norm(sequence)
        if self.output_projection is None:
            logits = self.target_embedding(sequence, reverse=True)  # float32
        else:
            # Through `kernel_matmul`, as the tied projection: d_model -> vocabulary widens.
            logits = dense_matmul(self.output_projection, sequence)  # (batch, length, vocabulary)
            logits = ops.cast(logits, "float32")
        if self.logits_bias is not None:
            logits = logits + self.logits_bias
        return logits

    def decode_sequence(
        self,
        decoder_token_ids,
        encoder_outputs,
        encoder_padding_mask,
        training=None,
        return_attention_scores=False,
    ):
        """Runs the whole decoder stack over `decoder_token_ids` without a cache.

        Args:
            decoder_token_ids: int (batch, target_length), the shifted target.
            encoder_outputs: (batch, source_length, d_model) from `encode`.
            encoder_padding_mask: boolean (batch, source_length), `True` at real
                source tokens.
            training: bool. Enables dropout.
            return_attention_scores: bool. Also return each block's weights.

        Returns:
            float32 logits (batch, target_length, vocabulary_size), and a
            list of per-block attention weight dicts when asked.
        """
        self._ensure_built()
        sequence = self._embed_target(decoder_token_ids, training=training)
        scores = []
        for block in self.decoder_blocks:
            sequence = block(
                sequence,
                encoder_outputs,
                encoder_padding_mask=encoder_padding_mask,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            if return_attention_scores:
                sequence, weights = sequence
                scores.append(weights)
        logits = self._logits(sequence)
        return (logits, scores) if return_attention_scores else logits

    def initialize_cache(self, encoder_outputs, encoder_token_ids, max_length, rows_per_source=1):
        """Decoding state for `decode`: empty self-attention buffers, cross-attention keys.

        Cross-attention keys and values are projected here, once per source.

        Args:
            encoder_outputs: (batch, source_length, d_model) from `encode`.
            encoder_token_ids: int (batch, source_length), for the padding mask.
            max_length: int. Number of target positions the buffers hold: 0
                for a cache that grows (`keras_transformer.backend.growing_cache`).
            rows_per_source: int. Target rows decoded per source (the beam
                size): `decode` then takes batch * rows_per_source rows, those
                of source `i` consecutive, and every row of a source reads its
                one copy of the cross-attention keys and values.

        Returns:
            A `DecodingCache` built by the layers' cache contract
            (`keras_transformer.layers.CachedAttention`): `growing` holds one
            entry per decoder block, its self-attention's `initial_cache`
            (batch * rows_per_source rows; beam search reorders them);
            `fixed` is a dict of `"cross_attention"`, one entry per block, its
            cross-attention's `compute_key_value` of the encoder output
            (batch rows), and `"encoder_padding_mask"` (batch, source_length).
        """
        self._ensure_built()
        rows = ops.shape(encoder_outputs)[0] * rows_per_source
        blocks = self.decoder_blocks
        return DecodingCache(
            growing=tuple(block.self_attention.initial_cache(rows, max_length) for block in blocks),
            fixed={
                "cross_attention": tuple(
                    block.cross_attention.compute_key_value(encoder_outputs) for block in blocks
                ),
                "encoder_padding_mask": padding_mask(encoder_token_ids, self.config.pad_id),
            },
        )

    @contextlib.contextmanager
    def fixed_decoder_weights(self):
        """Decoder weight matrices computed once, for a decoding loop entered inside.

        `decode` called in a loop applies the same weights at every step; entered
        in the same trace before the loop, this prepares them once instead of at
        every step (see `MultiHeadAttention.fixed_matrices` and
        `TokenEmbedding.fixed_output_matrix`). Same values.

        Example:

        >>> with model.fixed_decoder_weights():
        ...     tokens, scores = ops.while_loop(not_done, step, state)
        """
        self._ensure_built()
        with contextlib.ExitStack() as stack:
            for block in self.decoder_blocks:
                stack.enter_context(block.self_attention.fixed_matrices())
                stack.enter_context(block.cross_attention.fixed_matrices())
            if self.output_projection is None:  # logits from the shared embedding matrix
                stack.enter_context(self.target_embedding.fixed_output_matrix())
            yield

    def decode(self, decoder_token_ids, cache, index):
        """Decodes from position `index` on, reading and extending `cache`.

        Args:
            decoder_token_ids: int (batch, steps), usually steps = 1: the
                tokens at positions `index, ..., index + steps - 1`.
            cache: the `DecodingCache` from `initialize_cache` (or a previous
                `decode`).
            index: int or scalar int tensor, the position of the first token.

        Returns:
            `(logits, cache)`: float32 logits (batch, steps, vocabulary_size)
            for the tokens that follow, and the updated cache.
        """
        self._ensure_built()
        # Decoding never drops: `training=False` lets each dropout return its input at once.
        sequence = self._embed_target(decoder_token_ids, start_index=index, training=False)
        growing = []
        for block, block_cache, cross_cache in zip(
            self.decoder_blocks, cache.growing, cache.fixed["cross_attention"], strict=True
        ):
            sequence, block_cache = block(
                sequence,
                encoder_padding_mask=cache.fixed["encoder_padding_mask"],
                self_attention_cache=block_cache,
                cross_attention_cache=cross_cache,
                cache_index=index,
                training=False,
            )
            growing.append(block_cache)
        return self._logits(sequence), DecodingCache(tuple(growing), cache.fixed)

    def attention_weights(self, inputs):
        """Attention weights of every layer, for figures like the paper's 3-5.

        Args:
            inputs: the dict `call` takes.

        Returns:
            A dict with `"encoder_self_attention"`, `"decoder_self_attention"`
            and `"decoder_cross_attention"`: lists (one per layer) of float32
            (batch, heads, query_length, key_length) weights.
        """
        encoder_token_ids, decoder_token_ids = self._check_inputs(inputs)
        encoder_outputs, encoder_scores = self.encode(
            encoder_token_ids, return_attention_scores=True
        )
        mask = padding_mask(encoder_token_ids, self.config.pad_id)
        _, decoder_scores = self.decode_sequence(
            decoder_token_ids, encoder_outputs, mask, return_attention_scores=True
        )
        return {
            "encoder_self_attention": encoder_scores,
            "decoder_self_attention": [s["self_attention"] for s in decoder_scores],
            "decoder_cross_attention": [s["cross_attention"] for s in decoder_scores],
        }

    def _check_inputs(self, inputs):
        if not isinstance(inputs, dict):
            raise TypeError(
                f"Seq2SeqTransformer expects a dict with keys {list(INPUT_KEYS)}. "
                f"Received: inputs of type {type(inputs).__name__}"
            )
        missing = [key for key in INPUT_KEYS if key not in inputs]
        unexpected = sorted(set(inputs) - set(INPUT_KEYS))
        if missing or unexpected:
            raise ValueError(
                f"Seq2SeqTransformer expects the keys {list(INPUT_KEYS)}. "
                f"Missing: {missing}; unexpected: {unexpected}. Received keys: {sorted(inputs)}"
            )
        tensors = []
        for key in INPUT_KEYS:
            dtype = keras.backend.standardize_dtype(inputs[key].dtype)
            if "int" not in dtype:
                raise TypeError(f"`{key}` must hold integer token ids. Received: dtype={dtype}")
            if len(inputs[key].shape) != 2:
                raise ValueError(
                    f"`{key}` must have shape (batch, length). Received: shape={inputs[key].shape}"
                )
            tensors.append(inputs[key])
        return tensors

    def enable_lora(self, rank, targets=DEFAULT_LORA_TARGETS, alpha=None):
        """Keras' LoRA (`enable_lora` of its `Dense` / `EinsumDense`) on chosen projections.

        Every weight of the model is frozen; the projections of `targets` get
        trainable factors A (he-uniform) and B (zeros), and compute with
        `kernel + (alpha / rank) A B`: at the start, the model's own output.
        A checkpoint holds the base weights and the factors apart;
        `merged_model` gives a plain model with them merged.

        Each projection's change is of rank `rank` as a whole d_in x d_out
        matrix (`AdaptableEinsumDense`): r (d_in + d_out) parameters.

        Args:
            rank: int, from 1 to the narrowest adapted projection's width.
            targets: "query+value" (W^Q and W^V of every attention layer,
                the LoRA paper's choice; the default), "attention" (W^Q, W^K,
                W^V and W^O) or "attention+ffn" (the four and both
                feed-forward kernels).
            alpha: number or None. The delta's scale is `alpha / rank`; None
                means `rank` (scale 1).

        Example:

        >>> model = Seq2SeqTransformer.from_architecture("base", vocabulary_size=37000)
        >>> model.enable_lora(8)
        >>> sum(math.prod(w.shape) for w in model.trainable_weights)  # 0.47% of the model
        294912
        """
        if self.lora_settings:
            raise ValueError(f"LoRA is already enabled on this model: {self.lora_settings}")
        self.lora_settings = enable_model_lora(self, rank, targets, alpha)

    def merged_model(self):
        """A model without LoRA whose weights are this one's, the factors merged into the kernels.

        Returns:
            A built `Seq2SeqTransformer` of the same config (this model itself
            when LoRA is not enabled).
        """
        if not self.lora_settings:
            return self
        config = self.get_config()
        del config["lora"]
        merged = type(self).from_config(config)
        merged.build()
        merged.set_weights(merged_weight_values(self))
        return merged

    def get_config(self):
        config = super().get_config()
        config["config"] = self.config.to_dict()
        if self.lora_settings:
            config["lora"] = dict(self.lora_settings)
        self_attention = self.decoder_blocks[0].self_attention_class
        if self_attention is not MultiHeadAttention:
            config["decoder_self_attention"] = keras.saving.get_registered_name(self_attention)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        model_config = TransformerConfig.from_dict(config.pop("config"))
        lora = config.pop("lora", None)
        model = cls(model_config, **config)
        if lora:
            model.enable_lora(**lora)
        return model
