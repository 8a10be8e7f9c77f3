"""`import_opennmt` / `keras-transformer import opennmt` against OpenNMT-py's forward pass.

The test writes tiny checkpoints in OpenNMT-py v3's layout (`model`, `generator`, `vocab`,
`opt`) with random weights, and computes the logits as OpenNMT-py's Transformer does, in
plain torch: pre-LN layers, a final LayerNorm per stack, embeddings times sqrt(d_model) plus
its sinusoid, the generator's bias. The imported model must give the same logits on every
backend, and the same greedy translations.
"""

import argparse
import io
import math

import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT

torch = pytest.importorskip("torch")

from keras_transformer.commands.import_opennmt import main as opennmt_main  # noqa: E402
from keras_transformer.pretrained.opennmt import import_opennmt  # noqa: E402

SPECIALS = ["<unk>", "<blank>", "<s>", "</s>"]  # OpenNMT-py's order: ids 0, 1, 2, 3
UNK, PAD, BOS, EOS = range(4)
SENTENCES = ["the new world is low", "a newer world", "hello low world", "the old man"] * 30
TEXTS = ["hello newer world", "the low man is old"]
D_MODEL, HEADS, FF, LAYERS = 16, 2, 32, 2
# name -> OpenNMT-py options of the case (beyond the common ones).
CASES = {
    "shared_tied": {
        "share_vocab": True,
        "share_embeddings": True,
        "share_decoder_embeddings": True,
        "position_encoding_type": "SinusoidalInterleaved",
        "add_qkvbias": False,
        "add_ffnbias": True,
        "pos_ffn_activation_fn": "relu",
    },
    "separate_untied": {
        "share_vocab": False,
        "share_embeddings": False,
        "share_decoder_embeddings": False,
        "position_encoding_type": "SinusoidalConcat",
        "add_qkvbias": True,
        "add_ffnbias": False,
        "pos_ffn_activation_fn": "gelu",
    },
}


def sentencepiece_model():
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(SENTENCES), model_writer=model, vocab_size=30,
        model_type="bpe", bos_id=-1, eos_id=-1,
    )  # fmt: skip
    return model.getvalue()


def sinusoid(kind, length=5000, dim=D_MODEL):
    """OpenNMT-py's position table, (length, dim)."""
    position = np.arange(length, dtype="float64")[:, None]
    if kind == "SinusoidalInterleaved":
        table = np.zeros((length, dim))
        rates = np.exp(np.arange(0, dim, 2) * -(math.log(10000.0) / dim))
        table[:, 0::2], table[:, 1::2] = np.sin(position * rates), np.cos(position * rates)
        return table.astype("float32")
    rates = np.exp(np.arange(dim // 2) * -(math.log(10000) / (dim // 2 - 1)))
    return np.concatenate([np.sin(position * rates), np.cos(position * rates)], 1).astype("float32")


def random_checkpoint(options, src_vocab, tgt_vocab, seed):
    """`(checkpoint, state)`: a checkpoint dict as OpenNMT-py's model_saver writes it."""
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape, scale=0.4, offset=0.0):
        return offset + scale * torch.randn(*shape, generator=generator)

    state = {}

    def linear(name, out, inputs, bias):
        state[f"{name}.weight"] = randn(out, inputs)
        if bias:
            state[f"{name}.bias"] = randn(out, scale=0.1)

    def norm(name):
        state[f"{name}.weight"] = randn(D_MODEL, scale=0.1, offset=1.0)
        state[f"{name}.bias"] = randn(D_MODEL, scale=0.1)

    def attention(name):
        for part in ("linear_query", "linear_keys", "linear_values", "final_linear"):
            linear(f"{name}.{part}", D_MODEL, D_MODEL, options["add_qkvbias"])

    def feed_forward(name):
        linear(f"{name}.w_1", FF, D_MODEL, options["add_ffnbias"])
        linear(f"{name}.w_2", D_MODEL, FF, options["add_ffnbias"])
        norm(f"{name}.layer_norm")

    table = torch.tensor(sinusoid(options["position_encoding_type"]))[:, None, :]
    source_embedding = randn(len(src_vocab), D_MODEL, scale=0.1)
    for stack, vocab in (("encoder", src_vocab), ("decoder", tgt_vocab)):
        embedding = source_embedding if options["share_embeddings"] else None
        if embedding is None:
            embedding = randn(len(vocab), D_MODEL, scale=0.1)
        state[f"{stack}.embeddings.make_embedding.emb_luts.0.weight"] = embedding
        state[f"{stack}.embeddings.make_embedding.pe.pe"] = table
        norm(f"{stack}.layer_norm")
    for i in range(LAYERS):
        prefix = f"encoder.transformer.{i}"
        attention(f"{prefix}.self_attn")
        norm(f"{prefix}.layer_norm")
        feed_forward(f"{prefix}.feed_forward")
        prefix = f"decoder.transformer_layers.{i}"
        attention(f"{prefix}.self_attn")
        norm(f"{prefix}.layer_norm_1")
        attention(f"{prefix}.context_attn")
        norm(f"{prefix}.layer_norm_2")
        feed_forward(f"{prefix}.feed_forward")
    output = state["decoder.embeddings.make_embedding.emb_luts.0.weight"]
    if not options["share_decoder_embeddings"]:
        output = randn(len(tgt_vocab), D_MODEL)
    generator_state = {"weight": output, "bias": randn(len(tgt_vocab), scale=0.5)}
    opt = {
        "encoder_type": "transformer", "decoder_type": "transformer", "model_task": "seq2seq",
        "enc_layers": LAYERS, "dec_layers": LAYERS, "heads": HEADS, "transformer_ff": FF,
        "hidden_size": D_MODEL, "enc_hid_size": D_MODEL, "dec_hid_size": D_MODEL,
        "position_encoding": True, "max_relative_positions": 0, "self_attn_type":
        "scaled-dot-flash", "layer_norm": "standard", "norm_eps": 1e-6, "dropout": [0.1],
        "attention_dropout": [0.1], "copy_attn": False, "num_kv": 0, "parallel_residual": False,
        "transforms": ["sentencepiece", "filtertoolong"], "lora_layers": [],
        "src_subword_model": "/nonexistent/data/spm.model",
        "tgt_subword_model": "/nonexistent/data/spm.model", **options,
    }  # fmt: skip
    checkpoint = {
        "model": state,
        "generator": generator_state,
        "vocab": {"src": src_vocab, "tgt": tgt_vocab, "data_task": "seq2seq",
                  "decoder_start_token": "<s>"},
        "opt": argparse.Namespace(**opt),
        "optim": {"step": 10, "lr": torch.tensor(0.5)},
    }  # fmt: skip
    return checkpoint


class Reference:
    """OpenNMT-py's Transformer forward pass and greedy search, in plain torch."""

    def __init__(self, checkpoint):
        self.w = {name: value.double() for name, value in checkpoint["model"].items()}
        self.w.update({f"generator.{k}": v.double() for k, v in checkpoint["generator"].items()})
        opt = vars(checkpoint["opt"])
        self.gelu = opt["pos_ffn_activation_fn"] == "gelu"

    def norm(self, x, name):
        return torch.nn.functional.layer_norm(
            x, (D_MODEL,), self.w[f"{name}.weight"], self.w[f"{name}.bias"], eps=1e-6
        )

    def linear(self, x, name):
        bias = self.w.get(f"{name}.bias")
        return torch.nn.functional.linear(x, self.w[f"{name}.weight"], bias)

    def attention(self, query, memory, name, blocked):
        def heads(x):
            return x.view(x.shape[0], -1, HEADS, D_MODEL // HEADS).transpose(1, 2)

        q = heads(self.linear(query, f"{name}.linear_query")) / math.sqrt(D_MODEL // HEADS)
        k = heads(self.linear(memory, f"{name}.linear_keys"))
        v = heads(self.linear(memory, f"{name}.linear_values"))
        scores = (q @ k.transpose(2, 3)).masked_fill(blocked[:, None], -1e18)
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(query.shape)
        return self.linear(context, f"{name}.final_linear")

    def feed_forward(self, x, name):
        inner = self.linear(self.norm(x, f"{name}.layer_norm"), f"{name}.w_1")
        inner = torch.nn.functional.gelu(inner) if self.gelu else inner.relu()
        return x + self.linear(inner, f"{name}.w_2")

    def embed(self, ids, stack):
        table = self.w[f"{stack}.embeddings.make_embedding.pe.pe"][:, 0]
        lut = self.w[f"{stack}.embeddings.make_embedding.emb_luts.0.weight"]
        return lut[ids] * math.sqrt(D_MODEL) + table[: ids.shape[1]]

    def logits(self, source, target):
        source, target = torch.as_tensor(source), torch.as_tensor(target)
        source_blocked = (source == PAD)[:, None, :]
        x = self.embed(source, "encoder")
        for i in range(LAYERS):
            prefix = f"encoder.transformer.{i}"
            h = self.norm(x, f"{prefix}.layer_norm")
            x = x + self.attention(h, h, f"{prefix}.self_attn", source_blocked)
            x = self.feed_forward(x, f"{prefix}.feed_forward")
        memory = self.norm(x, "encoder.layer_norm")
        length = target.shape[1]
        future = torch.ones(length, length, dtype=torch.bool).triu(1)[None]
        y = self.embed(target, "decoder")
        for i in range(LAYERS):
            prefix = f"decoder.transformer_layers.{i}"
            h = self.norm(y, f"{prefix}.layer_norm_1")
            y = y + self.attention(h, h, f"{prefix}.self_attn", future)
            h = self.norm(y, f"{prefix}.layer_norm_2")
            y = y + self.attention(h, memory, f"{prefix}.context_attn", source_blocked)
            y = self.feed_forward(y, f"{prefix}.feed_forward")
        return self.linear(self.norm(y, "decoder.layer_norm"), "generator").float().numpy()

    def greedy(self, source, max_extra_length):
        """Each row's tokens until EOS (included), at most source length + extra, then EOS."""
        rows = []
        for row in source:
            ids = [i for i in row if i != PAD]
            output = [BOS]
            while output[-1] != EOS or len(output) == 1:
                logits = self.logits([ids], [output])[0, -1].astype("float64")
                logits[[PAD, BOS]] = -np.inf  # never generated
                limit = len(output) - 1 >= len(ids) + max_extra_length
                output.append(EOS if limit else int(np.argmax(logits)))
            rows.append(output[1:])
        return rows


def _vocabularies(pieces, name):
    if CASES[name]["share_vocab"]:
        vocab = SPECIALS + pieces
        return vocab, vocab
    # Each side lacks pieces the other has: a source piece missing is the source's <unk>.
    return SPECIALS + pieces[:-4], SPECIALS + pieces[::-1][:-6]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """name -> (model, tokenizer, reference, checkpoint path) for every case, imported once."""
    import sentencepiece as spm

    proto = sentencepiece_model()
    processor = spm.SentencePieceProcessor(model_proto=proto)
    pieces = [processor.id_to_piece(i) for i in range(1, processor.get_piece_size())]
    result = {}
    for seed, name in enumerate(CASES):
        folder = tmp_path_factory.mktemp(name)
        (folder / "spm.model").write_bytes(proto)  # found beside the checkpoint
        src_vocab, tgt_vocab = _vocabularies(pieces, name)
        checkpoint = random_checkpoint(CASES[name], src_vocab, tgt_vocab, seed)
        torch.save(checkpoint, folder / "model.pt")
        model, tokenizer = import_opennmt(folder / "model.pt", folder / "model.keras")
        result[name] = (model, tokenizer, Reference(checkpoint), folder, processor, checkpoint)
    return result


def _onmt_ids(processor, vocab, text):
    """OpenNMT-py's ids: the SentencePiece pieces looked up in the vocabulary, <unk> else."""
    return [vocab.index(p) if p in vocab else UNK for p in processor.encode_as_pieces(text)]


def _padded(rows):
    width = max(len(row) for row in rows)
    return [row + [PAD] * (width - len(row)) for row in rows]


def _logits(model, source, target):
    inputs = {
        "encoder_token_ids": np.asarray(source, "int32"),
        "decoder_token_ids": np.asarray(target, "int32"),
    }
    return keras.ops.convert_to_numpy(model(inputs, training=False))


@pytest.mark.parametrize("name", list(CASES))
def test_logits_equal_opennmt_forward_pass(cases, name):
    model, tokenizer, reference, _, processor, checkpoint = cases[name]
    vocab = checkpoint["vocab"]
    ours = _padded([[int(i) for i in ids] for ids in tokenizer(TEXTS)])
    theirs = _padded([_onmt_ids(processor, vocab["src"], text) for text in TEXTS])
    target = [[BOS, 5, 9, 7, 6], [BOS, 8, 8, 4, 10]]
    expected = reference.logits(theirs, target)
    logits = _logits(model, ours, target)
    tgt_size = len(vocab["tgt"])
    np.testing.assert_allclose(logits[..., :tgt_size], expected, atol=1e-4)
    assert (logits[..., tgt_size:] < -1e8).all()  # the source's extra pieces: never produced
    if name == "separate_untied":
        assert any(i == UNK for row in theirs for i in row), theirs  # a piece only tgt has


@pytest.mark.parametrize("name", list(CASES))
def test_greedy_search_equals_opennmt_greedy(cases, name):
    from keras_transformer.decoding.greedy_search import build_greedy_search

    model, tokenizer, reference, _, processor, checkpoint = cases[name]
    source = _padded([[int(i) for i in ids] for ids in tokenizer(TEXTS)])
    theirs = _padded([_onmt_ids(processor, checkpoint["vocab"]["src"], text) for text in TEXTS])
    search = build_greedy_search(
        model, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id, max_extra_length=3
    )
    tokens, _ = search(keras.ops.convert_to_tensor(np.asarray(source, "int32")))
    tokens = keras.ops.convert_to_numpy(tokens)
    for row, expected in zip(tokens, reference.greedy(theirs, 3), strict=True):
        assert expected[-1] == EOS
        expected = expected[:-1]  # the search returns EOS and what follows as padding
        assert list(row[: len(expected)]) == expected
        assert (row[len(expected) :] == PAD).all()


@BACKEND_INDEPENDENT
def test_command_and_load_translator_give_the_import(cases, tmp_path, capsys):
    import keras_transformer as kt
    from keras_transformer.decoding.translator import Translator
    from keras_transformer.export.load_translation_model import load_translation_model

    model, tokenizer, _, folder, *_ = cases["separate_untied"]
    output = tmp_path / "onmt.keras"
    assert opennmt_main([str(folder / "model.pt"), "--output", str(output)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip().endswith(f"wrote {output}")
    loaded, _ = load_translation_model(output)
    source = _padded([[int(i) for i in ids] for ids in tokenizer(TEXTS)])
    target = [[BOS, 5, 9], [BOS, 8, 8]]
    np.testing.assert_allclose(_logits(loaded, source, target), _logits(model, source, target))
    settings = {"search": "greedy", "max_extra_length": 3}
    expected = Translator(model, tokenizer, **settings, add_source_eos=False).translate(TEXTS)
    # OpenNMT-py's sources carry no end id: the imported model says so, and translation follows.
    assert loaded.config.source_eos is False
    assert Translator(loaded, tokenizer, **settings).add_source_eos is False
    for name in (folder, folder / "model.pt"):  # a folder or a checkpoint, recognized
        assert kt.load_translator(name, **settings).translate(TEXTS) == expected, name


def _fail(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        opennmt_main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(lines) == 1, lines
    return lines[0]


def _save_with(checkpoint, path, **options):
    """`checkpoint` saved to `path` with `options` changed."""
    opt = argparse.Namespace(**{**vars(checkpoint["opt"]), **options})
    torch.save({**checkpoint, "opt": opt}, path)


@BACKEND_INDEPENDENT
def test_bad_checkpoints_get_one_line(cases, tmp_path, capsys):
    checkpoint = cases["shared_tied"][5]
    folder = cases["shared_tied"][3]
    out = ["--output", str(tmp_path / "out.keras")]
    _save_with(checkpoint, tmp_path / "rnn.pt", encoder_type="brnn")
    line = _fail([str(tmp_path / "rnn.pt"), *out], capsys)
    assert "rnn.pt: encoder_type='brnn'; only OpenNMT-py's Transformer" in line
    _save_with(checkpoint, tmp_path / "relative.pt", max_relative_positions=20)
    line = _fail([str(tmp_path / "relative.pt"), *out], capsys)
    assert "max_relative_positions=20 (relative, rotary or ALiBi positions)" in line
    torch.save({"model": checkpoint["model"], "args": {}}, tmp_path / "fairseq.pt")
    line = _fail([str(tmp_path / "fairseq.pt"), *out], capsys)
    assert "fairseq.pt: not an OpenNMT-py checkpoint (expected the keys" in line
    weightless = {key: value for key, value in checkpoint.items() if key != "model"}
    torch.save(weightless, tmp_path / "weightless.pt")
    line = _fail([str(tmp_path / "weightless.pt"), *out], capsys)
    assert "weightless.pt: holds no weights (OpenNMT-py's safetensors mode" in line
    (tmp_path / "text.pt").write_text("not a checkpoint\n")
    line = _fail([str(tmp_path / "text.pt"), *out], capsys)
    assert "text.pt: not a torch checkpoint" in line
    line = _fail([str(folder / "model.pt"), "--src-subword-model", str(tmp_path / "no.model"),
                  *out], capsys)  # fmt: skip
    assert "--src-subword-model" in line and "no such file" in line
    assert not (tmp_path / "out.keras").exists()


@BACKEND_INDEPENDENT
def test_checkpoint_code_does_not_run(cases, tmp_path, capsys):
    """A class in the checkpoint (its training state) is kept as data, never called."""
    checkpoint = cases["shared_tied"][5]
    torch.save({**checkpoint, "optim": {"meter": Exploding()}}, tmp_path / "model.pt")
    (tmp_path / "spm.model").write_bytes((cases["shared_tied"][3] / "spm.model").read_bytes())
    assert opennmt_main([str(tmp_path / "model.pt"), "--output", str(tmp_path / "m.keras")]) == 0


class Exploding:
    """Fails if unpickled as itself: the weights-only loader must not build it."""

    def __init__(self):
        self.value = 1  # a state, so that unpickling calls __setstate__

    def __setstate__(self, state):
        raise AssertionError("the checkpoint's class was loaded")


@BACKEND_INDEPENDENT
def test_a_missing_or_misshapen_tensor_is_named(cases, tmp_path, capsys):
    """The shared weight setter: one line naming the tensor, and the weight it was for."""
    checkpoint = cases["separate_untied"][5]
    (tmp_path / "spm.model").write_bytes((cases["separate_untied"][3] / "spm.model").read_bytes())
    name = "decoder.transformer_layers.1.context_attn.linear_keys.weight"
    out = ["--output", str(tmp_path / "out.keras")]
    state = dict(checkpoint["model"])
    state[name] = state[name][:, :-1]
    torch.save({**checkpoint, "model": state}, tmp_path / "misshapen.pt")
    line = _fail([str(tmp_path / "misshapen.pt"), *out], capsys)
    assert f"{name} has shape (16, 15); the model's decoder.1.cross_attention.key.kernel" in line
    del state[name]
    torch.save({**checkpoint, "model": state}, tmp_path / "missing.pt")
    line = _fail([str(tmp_path / "missing.pt"), *out], capsys)
    assert f"missing.pt: no tensor '{name}'" in line
    state = {**checkpoint["model"], "encoder.transformer.0.extra.weight": torch.zeros(2)}
    torch.save({**checkpoint, "model": state}, tmp_path / "extra.pt")
    line = _fail([str(tmp_path / "extra.pt"), *out], capsys)
    assert "tensors this import does not know: encoder.transformer.0.extra.weight" in line


# Runs the command line, then prints which backends (and torch) it loaded.
STARTUP = """
import sys
from keras_transformer.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print(sorted(n for n in ("tensorflow", "keras", "jax", "torch") if n in sys.modules))
sys.exit(code)
"""


@BACKEND_INDEPENDENT
def test_help_and_a_wrong_file_load_no_backend(tmp_path):
    import dataclasses
    import subprocess
    import sys

    from keras_transformer.commands import import_opennmt

    (tmp_path / "text.pt").write_text("not a checkpoint\n")
    for arguments, code in (
        (["import", "opennmt", "--help"], 0),
        (["import", "opennmt", "text.pt", "--output", "x.keras"], 2),
    ):
        result = subprocess.run(
            [sys.executable, "-c", STARTUP, *arguments],
            capture_output=True, text=True, cwd=tmp_path, timeout=120,
        )  # fmt: skip
        assert result.returncode == code and result.stdout.splitlines()[-1] == "[]", result
    assert "CHECKPOINT text.pt: not a torch checkpoint" in result.stderr
    parser, added = import_opennmt.build_parser()
    fields = {field.name for field in dataclasses.fields(import_opennmt.OpenNMTImportOptions)}
    assert {action.dest for action in parser._actions} - {"help", "verbose"} <= fields
    assert set(added) == fields


@BACKEND_INDEPENDENT
def test_the_registry_makes_the_import_commands_and_the_source_kinds():
    import importlib

    from keras_transformer.commands.import_model import FORMAT_COMMANDS
    from keras_transformer.pretrained.formats import FORMATS, formats
    from keras_transformer.pretrained.model_source import KINDS

    assert list(FORMAT_COMMANDS) == list(FORMATS) and "opennmt" in FORMATS
    assert ("keras", *FORMATS) == KINDS
    parts = ("NAME", "FOLDER_HINT", "MISSING_HINT", "accepts_file", "find_in_folder")
    for module in formats():
        assert all(hasattr(module, part) for part in (*parts, "translation_model")), module
        assert callable(importlib.import_module(FORMAT_COMMANDS[module.NAME]).main)
    assert formats()[-1].NAME == "fairseq"  # it takes any .pt: asked last


@BACKEND_INDEPENDENT
def test_the_ctranslate2_export_gives_sources_no_end_id(cases, tmp_path):
    import json

    from keras_transformer.export.ctranslate2_export import export_ctranslate2

    model, tokenizer, *_ = cases[next(iter(CASES))]
    assert model.config.source_eos is False  # the importer's setting
    path = export_ctranslate2(model, tokenizer, tmp_path / "ct2")
    with open(f"{path}/config.json", encoding="utf-8") as file:
        config = json.load(file)
    assert config["add_source_eos"] is False and config["add_source_bos"] is False
