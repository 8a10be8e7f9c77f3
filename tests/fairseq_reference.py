"""fairseq's `transformer` forward pass in plain torch, and checkpoints in fairseq's layout.

Written from fairseq's module definitions (`fairseq/models/transformer/transformer_encoder.py`,
`transformer_decoder.py`, `fairseq/modules/transformer_layer.py`, `multihead_attention.py`,
`sinusoidal_positional_embedding.py`, `fairseq/data/dictionary.py`), independently of
`keras_transformer.pretrained.fairseq`: it reads the state dict by fairseq's names, works
batch-first in float64, and writes the `torch.save` file fairseq's `checkpoint_utils` writes
(`{"args": Namespace, "model": ...}` or `{"cfg": {"model": ...}, "model": ...}`). Dropout is
off (inference).
"""

import argparse
import math

import torch

SPECIAL_SYMBOLS = ("<s>", "<pad>", "</s>", "<unk>")  # fairseq's Dictionary: ids 0, 1, 2, 3
PAD = 1
EOS = 2

# Tiny BPE data of the tests. subword-nmt 0.2 codes: merges in order, `</w>` closing a word.
CODES = (
    "#version: 0.2\nl o\nlo w</w>\ne r</w>\nn e\nne w\nh e\nhe l\nl o</w>\nhel lo</w>\nw o\nwo r\n"
)
EN_WORDS = ["low", "new@@", "er", "hello", "wor@@", "ld", ",", "!", "l@@", "d", "o@@", "w"]
DE_WORDS = ["hallo", "welt", "nie@@", "dr@@", "ig", ",", "!", "neu", "er", "w@@", "o@@"]

# What fairseq's architecture functions fill in (transformer_legacy.py).
BASE_ARGS = {
    "encoder_embed_path": None,
    "encoder_embed_dim": 512,
    "encoder_ffn_embed_dim": 2048,
    "encoder_layers": 6,
    "encoder_attention_heads": 8,
    "encoder_normalize_before": False,
    "encoder_learned_pos": False,
    "decoder_embed_path": None,
    "decoder_embed_dim": 512,
    "decoder_ffn_embed_dim": 2048,
    "decoder_layers": 6,
    "decoder_attention_heads": 8,
    "decoder_normalize_before": False,
    "decoder_learned_pos": False,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
    "activation_fn": "relu",
    "dropout": 0.1,
    "adaptive_softmax_cutoff": None,
    "adaptive_softmax_dropout": 0,
    "share_decoder_input_output_embed": False,
    "share_all_embeddings": False,
    "no_token_positional_embeddings": False,
    "adaptive_input": False,
    "no_cross_attention": False,
    "cross_self_attention": False,
    "decoder_output_dim": 512,
    "decoder_input_dim": 512,
    "no_scale_embedding": False,
    "layernorm_embedding": False,
    "tie_adaptive_weights": False,
    "checkpoint_activations": False,
    "encoder_layers_to_keep": None,
    "decoder_layers_to_keep": None,
    "encoder_layerdrop": 0,
    "decoder_layerdrop": 0,
    "quant_noise_pq": 0,
    "quant_noise_pq_block_size": 8,
    "quant_noise_scalar": 0,
    "max_source_positions": 1024,
    "max_target_positions": 1024,
    "task": "translation",
    "source_lang": "en",
    "target_lang": "de",
    "tokenizer": "moses",
    "bpe": "subword_nmt",
}


def tiny_args(arch, **overrides):
    """Complete args of a tiny model of `arch`, as a trained checkpoint holds them."""
    args = dict(BASE_ARGS, arch=arch, dropout=0.3 if "big" in arch else 0.1)
    dims = {
        "encoder_embed_dim": 16,
        "decoder_embed_dim": 16,
        "decoder_output_dim": 16,
        "decoder_input_dim": 16,
        "encoder_ffn_embed_dim": 24,
        "decoder_ffn_embed_dim": 24,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "encoder_attention_heads": 4 if "big" in arch else 2,
        "decoder_attention_heads": 4 if "big" in arch else 2,
    }
    args.update(dims)
    args.update(overrides)
    return args


def read_dictionary(path):
    """fairseq's Dictionary.load: the four specials, then one symbol per `word count` line."""
    symbols = list(SPECIAL_SYMBOLS)
    with open(path, encoding="utf-8") as file:
        for line in file:
            word, _count = line.rstrip("\n").rsplit(" ", 1)
            symbols.append(word)
    return symbols


def write_dictionary(path, words):
    with open(path, "w", encoding="utf-8") as file:
        for rank, word in enumerate(words):
            file.write(f"{word} {1000 - rank}\n")


# ---- state dict ---------------------------------------------------------------------------


def _linear(state, name, rows, columns, generator, bias=True):
    state[f"{name}.weight"] = torch.randn(rows, columns, generator=generator) / math.sqrt(columns)
    if bias:
        state[f"{name}.bias"] = 0.1 * torch.randn(rows, generator=generator)


def _layer_norm(state, name, dim, generator):
    state[f"{name}.weight"] = 1.0 + 0.2 * torch.randn(dim, generator=generator)
    state[f"{name}.bias"] = 0.1 * torch.randn(dim, generator=generator)


def _attention(state, name, dim, generator):
    for projection in ("k_proj", "v_proj", "q_proj", "out_proj"):
        _linear(state, f"{name}.{projection}", dim, dim, generator)


def _positions(state, stack, args, generator):
    """The sinusoid's placeholder buffer, or a learned table (PositionalEmbedding(learned=True)):
    max_positions + padding_idx + 1 rows, the padding row zero."""
    if not args[f"{stack}_learned_pos"]:
        state[f"{stack}.embed_positions._float_tensor"] = torch.tensor([1.0])
        return
    side = "source" if stack == "encoder" else "target"
    rows = args[f"max_{side}_positions"] + PAD + 1
    table = torch.randn(rows, args[f"{stack}_embed_dim"], generator=generator)
    table[PAD] = 0.0
    state[f"{stack}.embed_positions.weight"] = table


def random_state_dict(args, source_rows, target_rows, seed=0):
    """A state dict with fairseq's names and random values for `args`.

    Args:
        args: dict of fairseq args.
        source_rows, target_rows: rows of the encoder and decoder embedding matrices.
    """
    generator = torch.Generator().manual_seed(seed)
    d, ffn = args["encoder_embed_dim"], args["encoder_ffn_embed_dim"]
    state = {}
    embedding = torch.randn(target_rows, d, generator=generator) / math.sqrt(d)
    embedding[PAD] = 0.0  # nn.Embedding(padding_idx) starts that row at zero
    if args["share_all_embeddings"]:
        state["encoder.embed_tokens.weight"] = embedding
    else:
        source = torch.randn(source_rows, d, generator=generator) / math.sqrt(d)
        source[PAD] = 0.0
        state["encoder.embed_tokens.weight"] = source
    state["encoder.version"] = torch.tensor([3.0])
    _positions(state, "encoder", args, generator)
    for i in range(args["encoder_layers"]):
        prefix = f"encoder.layers.{i}"
        _attention(state, f"{prefix}.self_attn", d, generator)
        _layer_norm(state, f"{prefix}.self_attn_layer_norm", d, generator)
        _linear(state, f"{prefix}.fc1", ffn, d, generator)
        _linear(state, f"{prefix}.fc2", d, ffn, generator)
        _layer_norm(state, f"{prefix}.final_layer_norm", d, generator)
    if args["encoder_normalize_before"]:
        _layer_norm(state, "encoder.layer_norm", d, generator)
    state["decoder.embed_tokens.weight"] = embedding
    state["decoder.version"] = torch.tensor([3.0])
    _positions(state, "decoder", args, generator)
    for i in range(args["decoder_layers"]):
        prefix = f"decoder.layers.{i}"
        _attention(state, f"{prefix}.self_attn", d, generator)
        _layer_norm(state, f"{prefix}.self_attn_layer_norm", d, generator)
        _attention(state, f"{prefix}.encoder_attn", d, generator)
        _layer_norm(state, f"{prefix}.encoder_attn_layer_norm", d, generator)
        _linear(state, f"{prefix}.fc1", ffn, d, generator)
        _linear(state, f"{prefix}.fc2", d, ffn, generator)
        _layer_norm(state, f"{prefix}.final_layer_norm", d, generator)
    if args["decoder_normalize_before"]:
        _layer_norm(state, "decoder.layer_norm", d, generator)
    if args["share_decoder_input_output_embed"] or args["share_all_embeddings"]:
        state["decoder.output_projection.weight"] = embedding  # the same tensor, as fairseq
    else:
        _linear(state, "decoder.output_projection", target_rows, d, generator, bias=False)
    return state


def write_checkpoint(path, args, state, style="args"):
    """`torch.save` of what fairseq's checkpoint_utils.save_state writes.

    Args:
        style: "args" (fairseq < 0.10: an argparse.Namespace) or "cfg" (a dict of sections,
            the model's under "model" with its architecture as "_name").
    """
    history = [{"criterion_name": "LabelSmoothedCrossEntropyCriterion", "num_updates": 100}]
    checkpoint = {"model": state, "optimizer_history": history, "extra_state": {"epoch": 3}}
    if style == "args":
        checkpoint["args"] = argparse.Namespace(**args)
    else:
        model = {key: value for key, value in args.items() if key not in ("arch",)}
        model["_name"] = args["arch"]
        task = {
            "_name": "translation",
            "source_lang": args["source_lang"],
            "target_lang": args["target_lang"],
        }
        checkpoint["args"] = None
        checkpoint["cfg"] = {
            "model": model,
            "task": task,
            "tokenizer": {"_name": args["tokenizer"]},
            "bpe": {"_name": args["bpe"]},
        }
    torch.save(checkpoint, path)


# ---- forward pass -------------------------------------------------------------------------


def sinusoid_table(rows, dim, padding_idx):
    """SinusoidalPositionalEmbedding.get_embedding: sines, then cosines; the padding row 0."""
    half = dim // 2
    step = math.log(10000) / (half - 1)
    frequencies = torch.exp(torch.arange(half, dtype=torch.float64) * -step)
    angles = torch.arange(rows, dtype=torch.float64)[:, None] * frequencies[None, :]
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    if dim % 2:
        table = torch.cat([table, torch.zeros(rows, 1, dtype=torch.float64)], dim=1)
    table[padding_idx] = 0.0
    return table


def make_positions(tokens, padding_idx):
    """fairseq.utils.make_positions: real tokens numbered from padding_idx + 1."""
    mask = tokens.ne(padding_idx).int()
    return (torch.cumsum(mask, dim=1) * mask).long() + padding_idx


class Reference:
    """fairseq's TransformerModel forward (eval mode) from a state dict and args."""

    def __init__(self, state, args):
        self.w = {key: value.double() for key, value in state.items()}
        self.args = args

    def _linear(self, name, x, bias=True):
        out = x @ self.w[f"{name}.weight"].T
        return out + self.w[f"{name}.bias"] if bias else out

    def _norm(self, name, x):
        return torch.nn.functional.layer_norm(
            x, x.shape[-1:], self.w[f"{name}.weight"], self.w[f"{name}.bias"], eps=1e-5
        )

    def _activation(self, x):
        name = self.args["activation_fn"]
        if name == "relu":
            return torch.relu(x)
        if name == "gelu":
            return torch.nn.functional.gelu(x)
        if name == "swish":
            return x * torch.sigmoid(x)
        raise ValueError(name)

    def _attention(self, name, query, key, heads, key_padding_mask=None, causal=False):
        """MultiheadAttention: q scaled by head_dim^-0.5 after its projection."""
        batch, q_len, d = query.shape
        head_dim = d // heads
        q = self._linear(f"{name}.q_proj", query) * head_dim**-0.5
        k = self._linear(f"{name}.k_proj", key)
        v = self._linear(f"{name}.v_proj", key)

        def split(x):
            return x.view(batch, -1, heads, head_dim).transpose(1, 2)

        scores = split(q) @ split(k).transpose(-1, -2)  # (batch, heads, q_len, k_len)
        if causal:
            k_len = scores.shape[-1]
            future = torch.triu(torch.ones(q_len, k_len, dtype=torch.bool), 1)
            scores = scores.masked_fill(future, float("-inf"))
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        context = (weights @ split(v)).transpose(1, 2).reshape(batch, q_len, d)
        return self._linear(f"{name}.out_proj", context)

    def _sublayer(self, norm, x, before, function):
        residual = x
        if before:
            x = self._norm(norm, x)
        x = residual + function(x)
        return x if before else self._norm(norm, x)

    def _embed(self, stack, tokens):
        d = self.args[f"{stack}_embed_dim"]
        scale = 1.0 if self.args["no_scale_embedding"] else math.sqrt(d)
        x = scale * self.w[f"{stack}.embed_tokens.weight"][tokens]
        if self.args[f"{stack}_learned_pos"]:  # LearnedPositionalEmbedding
            table = self.w[f"{stack}.embed_positions.weight"]
        else:
            table = sinusoid_table(int(tokens.shape[1]) + PAD + 1, d, PAD)
        return x + table[make_positions(tokens, PAD)]

    def _ffn(self, prefix, x):
        return self._linear(f"{prefix}.fc2", self._activation(self._linear(f"{prefix}.fc1", x)))

    def encode(self, source):
        a = self.args
        before = a["encoder_normalize_before"]
        padding = source.eq(PAD)
        x = self._embed("encoder", source)
        x = x * (1 - padding[..., None].double())
        for i in range(a["encoder_layers"]):
            p = f"encoder.layers.{i}"
            x = self._sublayer(
                f"{p}.self_attn_layer_norm",
                x,
                before,
                lambda y, p=p: self._attention(
                    f"{p}.self_attn", y, y, a["encoder_attention_heads"], padding
                ),
            )
            x = self._sublayer(f"{p}.final_layer_norm", x, before, lambda y, p=p: self._ffn(p, y))
        if before:
            x = self._norm("encoder.layer_norm", x)
        return x, padding

    def decode(self, target_input, encoder_out, padding):
        a = self.args
        before = a["decoder_normalize_before"]
        heads = a["decoder_attention_heads"]
        x = self._embed("decoder", target_input)
        for i in range(a["decoder_layers"]):
            p = f"decoder.layers.{i}"
            x = self._sublayer(
                f"{p}.self_attn_layer_norm",
                x,
                before,
                lambda y, p=p: self._attention(f"{p}.self_attn", y, y, heads, causal=True),
            )
            x = self._sublayer(
                f"{p}.encoder_attn_layer_norm",
                x,
                before,
                lambda y, p=p: self._attention(f"{p}.encoder_attn", y, encoder_out, heads, padding),
            )
            x = self._sublayer(f"{p}.final_layer_norm", x, before, lambda y, p=p: self._ffn(p, y))
        if before:
            x = self._norm("decoder.layer_norm", x)
        return x @ self.w["decoder.output_projection.weight"].T

    def logits(self, source, target_input):
        """float64 logits (batch, target_length, target_rows) for int64 token tensors."""
        with torch.no_grad():
            encoder_out, padding = self.encode(torch.as_tensor(source))
            return self.decode(torch.as_tensor(target_input), encoder_out, padding)
