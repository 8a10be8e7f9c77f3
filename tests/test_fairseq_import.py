"""`import_fairseq` / `keras-transformer import fairseq` against fairseq's forward pass.

tests/fairseq_reference.py computes fairseq's `transformer` logits with torch from a state
dict under fairseq's names and writes checkpoints in fairseq's layout; the imported Keras
model must give the same logits on every backend (tests/test_moses_bpe_tokenizer.py checks
the tokenizer).
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from conftest import BACKEND_INDEPENDENT, only_under

torch = pytest.importorskip("torch")
pytest.importorskip("subword_nmt")

import fairseq_reference as ref  # noqa: E402

from keras_transformer.commands.import_fairseq import main as fairseq_main  # noqa: E402
from keras_transformer.pretrained.fairseq import import_fairseq  # noqa: E402
from keras_transformer.pretrained.fairseq.dictionary import (  # noqa: E402
    padded_symbols,
    read_fairseq_dictionary,
)

CODES, EN_WORDS, DE_WORDS = ref.CODES, ref.EN_WORDS, ref.DE_WORDS
JOINT_WORDS = EN_WORDS + [word for word in DE_WORDS if word not in EN_WORDS]
SOURCE = [[10, 4, 13, 7, 2, 1, 1], [5, 6, 4, 8, 9, 11, 2]]  # right-padded, </s>-ended
TARGET_INPUT = [[2, 4, 9, 5, 12], [2, 7, 7, 6, 4]]  # decoding starts from </s>

# name -> (architecture, checkpoint style, shared dictionary, extra args, padded as fairseq pads
# a dictionary: embedding rows up to a multiple of 8)
CASES = {
    "transformer_shared": ("transformer", "args", True, {"share_all_embeddings": True}, False),
    "wmt_en_de_separate_untied": ("transformer_wmt_en_de", "cfg", False, {}, True),
    "vaswani_big_separate_tied": (
        "transformer_vaswani_wmt_en_de_big",
        "args",
        False,
        {"share_decoder_input_output_embed": True},
        False,
    ),
    "learned_positions": (
        "transformer",
        "args",
        True,
        {
            "share_all_embeddings": True,
            "encoder_learned_pos": True,
            "decoder_learned_pos": True,
            "max_source_positions": 12,
            "max_target_positions": 12,
        },
        False,
    ),
    "t2t_pre_ln_gelu": (
        "transformer_wmt_en_de_big_t2t",
        "cfg",
        True,
        {
            "share_all_embeddings": True,
            "encoder_normalize_before": True,
            "decoder_normalize_before": True,
            "activation_fn": "gelu",
        },
        False,
    ),
}


def _write_case(folder, name):
    arch, style, shared, extra, padded = CASES[name]
    folder.mkdir()
    ref.write_dictionary(folder / "dict.en.txt", JOINT_WORDS if shared else EN_WORDS)
    ref.write_dictionary(folder / "dict.de.txt", JOINT_WORDS if shared else DE_WORDS)
    (folder / "bpecodes").write_text(CODES, encoding="utf-8")
    source_rows, target_rows = (
        len(ref.read_dictionary(folder / f"dict.{language}.txt")) for language in ("en", "de")
    )
    if padded:
        source_rows, target_rows = (-(-rows // 8) * 8 for rows in (source_rows, target_rows))
    args = ref.tiny_args(arch, **extra)
    if name == "wmt_en_de_separate_untied":
        args["activation_fn"] = "relu"
    state = ref.random_state_dict(args, source_rows, target_rows, seed=len(name))
    ref.write_checkpoint(folder / "model.pt", args, state, style=style)
    return args, state


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """name -> (model, tokenizer, reference, folder) for every case, imported once."""
    root = tmp_path_factory.mktemp("fairseq")
    result = {}
    for name in CASES:
        folder = root / name
        args, state = _write_case(folder, name)
        model, tokenizer = import_fairseq(folder / "model.pt", folder, folder / "model.keras")
        result[name] = (model, tokenizer, ref.Reference(state, args), folder)
    return result


def _logits(model, source, target_input):
    inputs = {
        "encoder_token_ids": np.asarray(source, "int32"),
        "decoder_token_ids": np.asarray(target_input, "int32"),
    }
    return keras.ops.convert_to_numpy(model(inputs, training=False))


@pytest.mark.parametrize("name", list(CASES))
def test_logits_equal_fairseq_forward_pass(imported, name):
    model, _, reference, _ = imported[name]
    expected = reference.logits(torch.tensor(SOURCE), torch.tensor(TARGET_INPUT)).numpy()
    np.testing.assert_allclose(_logits(model, SOURCE, TARGET_INPUT), expected, atol=1e-4)


@pytest.mark.parametrize(
    "name", ["transformer_shared", "wmt_en_de_separate_untied", "learned_positions"]
)
def test_cached_decoding_equals_fairseq_forward_pass(imported, name):
    """One step at a time through the key/value cache (positions from pad + 1 there too)."""
    model, _, reference, _ = imported[name]
    expected = reference.logits(torch.tensor(SOURCE), torch.tensor(TARGET_INPUT)).numpy()
    source = np.asarray(SOURCE, "int32")
    cache = model.initialize_cache(model.encode(source), source, max_length=len(TARGET_INPUT[0]))
    for step in range(len(TARGET_INPUT[0])):
        ids = np.asarray(TARGET_INPUT, "int32")[:, step : step + 1]
        logits, cache = model.decode(ids, cache, step)
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(logits)[:, 0], expected[:, step], atol=1e-4
        )


def test_saved_file_reloads_with_same_logits(imported):
    from keras_transformer.export.load_translation_model import load_translation_model

    model, tokenizer, _, folder = imported["wmt_en_de_separate_untied"]
    loaded, loaded_tokenizer = load_translation_model(folder / "model.keras", compile=False)
    np.testing.assert_allclose(
        _logits(loaded, SOURCE, TARGET_INPUT), _logits(model, SOURCE, TARGET_INPUT), atol=1e-6
    )
    assert loaded_tokenizer.get_config() == tokenizer.get_config()
    # A madeupword row beyond the dictionary of 15, as fairseq pads it to a multiple of 8.
    assert loaded.config.vocabulary_size == len(DE_WORDS) + 4 + 1 == 16
    assert loaded_tokenizer.get_vocabulary()[-2:] == [DE_WORDS[-1], "madeupword0000"]


def _reference_greedy(reference, source, steps):
    tokens = [ref.EOS]
    for _ in range(steps):
        logits = reference.logits(torch.tensor([source]), torch.tensor([tokens]))[0, -1]
        logits[ref.PAD] = -np.inf  # fairseq's generator never emits padding
        tokens.append(int(torch.argmax(logits)))
        if tokens[-1] == ref.EOS:
            break
    return tokens[1:]


@pytest.mark.parametrize("name", ["wmt_en_de_separate_untied", "learned_positions"])
def test_greedy_translation_follows_fairseq(imported, name):
    """Greedy search picks fairseq's argmax at every step, and ends where fairseq's does."""
    from keras_transformer.decoding.greedy_search import build_greedy_search

    model, tokenizer, reference, _ = imported[name]
    extra = 3
    search = build_greedy_search(
        model, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id, max_extra_length=extra
    )
    tokens, _ = search(np.asarray(SOURCE, "int32"))
    for row, source in zip(keras.ops.convert_to_numpy(tokens), SOURCE, strict=True):
        ours = [int(t) for t in row if t != ref.PAD]  # EOS and what follows are padding
        expected = _reference_greedy(reference, source, len(ours) + 1)
        assert ours == expected[: len(ours)]
        limit = sum(t != ref.PAD for t in source) + extra
        assert len(ours) == limit or expected[len(ours)] == ref.EOS


# ---- dictionary (backend-independent) ----------------------------------------


@BACKEND_INDEPENDENT
def test_dictionary_ids_follow_fairseq(tmp_path):
    path = tmp_path / "dict.en.txt"
    path.write_text("the 10\n, 9\nNew York 3\nthe 1 #fairseq:overwrite\n", encoding="utf-8")
    symbols = read_fairseq_dictionary(path)
    assert symbols == ["<s>", "<pad>", "</s>", "<unk>", "the", ",", "New York", "the"]
    assert padded_symbols(symbols, 8) == symbols
    path.write_text("the 10\n, 9\nmadeupword0001 1\n", encoding="utf-8")
    symbols = read_fairseq_dictionary(path)
    # fairseq's pad_to_multiple_ skips a filler name the dictionary holds.
    assert padded_symbols(symbols, 8)[7:] == ["madeupword0000"]
    fillers = ["madeupword0000", *(f"madeupword000{i}" for i in range(2, 8))]
    assert padded_symbols(symbols + ["x", "y"], 16)[9:] == fillers
    for rows in (6, 9, 10, 16):  # fewer rows, or more than fairseq's padding gives
        with pytest.raises(ValueError, match=f"has 7 symbols .* and the embedding matrix {rows} "):
            padded_symbols(symbols, rows)
    padded = padded_symbols(symbols, 8)
    # A dictionary saved with fairseq's padding that lost lines: no further fillers.
    with pytest.raises(ValueError, match="already ends with fairseq's padding"):
        padded_symbols(padded[:4] + padded[7:], 8)
    path.write_text("the 10\nthe 3\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"dict\.en\.txt:2: symbol 'the' appears twice"):
        read_fairseq_dictionary(path)
    path.write_text("the ten\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"dict\.en\.txt:1: expected"):
        read_fairseq_dictionary(path)


# ---- the command ---------------------------------------------------------------------------


def _run_command(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        fairseq_main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    return exit_info.value.code, lines


@BACKEND_INDEPENDENT
def test_command_bad_input_is_one_line_exit_2(tmp_path, capsys):
    folder = tmp_path / "case"
    args, state = _write_case(folder, "transformer_shared")
    out = str(tmp_path / "out.keras")
    ref.write_checkpoint(folder / "lstm.pt", dict(args, arch="lstm"), state)
    code, lines = _run_command(
        [str(folder / "lstm.pt"), "--dictionary-dir", str(folder), "--output", out], capsys
    )
    assert code == 2 and len(lines) == 1 and "'lstm' is not supported" in lines[0], lines
    ref.write_checkpoint(folder / "lne.pt", dict(args, layernorm_embedding=True), state)
    code, lines = _run_command(
        [str(folder / "lne.pt"), "--dictionary-dir", str(folder), "--output", out], capsys
    )
    assert code == 2 and len(lines) == 1 and "layernorm_embedding" in lines[0], lines
    (folder / "garbage.pt").write_bytes(b"not a checkpoint")
    code, lines = _run_command(
        [str(folder / "garbage.pt"), "--dictionary-dir", str(folder), "--output", out], capsys
    )
    assert code == 2 and len(lines) == 1 and "garbage.pt" in lines[0], lines
    # A function pickled by name (the format before torch 1.6): refused, and said so.
    checkpoint = {"args": ref.argparse.Namespace(**args), "model": state, "hook": len}
    torch.save(checkpoint, folder / "hook.pt", _use_new_zipfile_serialization=False)
    code, lines = _run_command(
        [str(folder / "hook.pt"), "--dictionary-dir", str(folder), "--output", out], capsys
    )
    assert code == 2 and len(lines) == 1, lines
    assert f"{folder / 'hook.pt'}: holds Python objects beyond tensors" in lines[0], lines
    assert "refuses to unpickle (len); expected a fairseq checkpoint" in lines[0], lines
    assert "weights_only" not in lines[0], lines
    # Three entries short of the embedding's 23 rows: not fairseq's padding (20 up to 24).
    ref.write_dictionary(folder / "dict.de.txt", JOINT_WORDS[:-3])
    code, lines = _run_command(
        [str(folder / "model.pt"), "--dictionary-dir", str(folder), "--output", out], capsys
    )
    assert code == 2 and len(lines) == 1, lines
    assert "dict.de.txt: the dictionary has 20 symbols" in lines[0], lines
    assert "embedding matrix 23 rows; fairseq pads a dictionary only up to" in lines[0], lines
    (folder / "dict.de.txt").unlink()
    code, lines = _run_command(
        [str(folder / "model.pt"), "--dictionary-dir", str(folder), "--output", out], capsys
    )
    assert code == 2 and len(lines) == 1 and "dict.de.txt" in lines[0], lines
    assert not os.path.exists(out)
    with open(out, "w") as file:
        file.write("the user's file")
    code, lines = _run_command(
        [str(folder / "model.pt"), "--dictionary-dir", str(folder), "--output", out], capsys
    )
    assert code == 2 and len(lines) == 1 and "--overwrite" in lines[0], lines
    with open(out) as file:
        assert file.read() == "the user's file"


@BACKEND_INDEPENDENT
def test_command_names_a_damaged_subword_model(tmp_path, capsys):
    folder = tmp_path / "case"
    _write_case(folder, "transformer_shared")
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\xff\xfe\x00 not text \x80")
    command = [str(folder / "model.pt"), "--dictionary-dir", str(folder)]
    out = ["--output", str(tmp_path / "out.keras")]
    code, lines = _run_command([*command, "--bpe-codes", str(garbage), *out], capsys)
    assert code == 2 and len(lines) == 1, lines
    assert f"{garbage}: not UTF-8 text (byte 0); expected subword-nmt BPE codes" in lines[0]
    flags = ["--sentencepiece-model", str(garbage), "--tokenizer", "space"]
    code, lines = _run_command([*command, *flags, *out], capsys)
    assert code == 2 and len(lines) == 1, lines
    assert f"{garbage}: not a SentencePiece model (expected the SentencePiece" in lines[0]
    assert "proto" not in lines[0] and ".cc" not in lines[0], lines
    assert not (tmp_path / "out.keras").exists()


@BACKEND_INDEPENDENT
def test_command_then_translate_end_to_end(tmp_path):
    folder = tmp_path / "case"
    _write_case(folder, "transformer_shared")
    model_file = tmp_path / "imported.keras"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, "-m", "keras_transformer"]
    result = subprocess.run(
        [*command, "import", "fairseq", str(folder / "model.pt"), "--dictionary-dir",
         str(folder), "--output", str(model_file)],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == ""
    result = subprocess.run(
        [*command, "translate", "--model", str(model_file), "--length-penalty-rule", "average",
         "--alpha", "1", "--max-extra-length", "3"],
        input="hello world!\nlow newer\n",
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(result.stdout.splitlines()) == 2


def _legacy_layout(state):
    """The names of fairseq < 0.9: fused in_proj, encoder layer_norms.N, decoder.embed_out."""
    old = {}
    for name, value in state.items():
        if ".self_attn.q_proj." in name or ".encoder_attn.q_proj." in name:
            kind = name.rsplit(".", 1)[1]
            prefix = name.split(".q_proj.")[0]
            parts = [state[f"{prefix}.{p}_proj.{kind}"] for p in ("q", "k", "v")]
            old[f"{prefix}.in_proj_{kind}"] = torch.cat(parts, dim=0)
        elif ".k_proj." in name or ".v_proj." in name:
            continue
        elif name.startswith("encoder.layers.") and "_layer_norm." in name:
            index = "0" if ".self_attn_layer_norm." in name else "1"
            old[name.replace(name.split(".")[3], f"layer_norms.{index}")] = value
        elif name == "decoder.output_projection.weight":
            old["decoder.embed_out"] = value
        else:
            old[name] = value
    return old


def test_older_checkpoint_layout_and_partial_args(imported, tmp_path):
    """Fused q/k/v, renamed norms and args without the defaults that base_architecture adds."""
    _, _, reference, folder = imported["wmt_en_de_separate_untied"]
    args = {key: reference.args[key] for key in ref.tiny_args("transformer_wmt_en_de")}
    partial = {key: args[key] for key in ("arch", "source_lang", "target_lang")}
    partial.update({k: v for k, v in args.items() if k.endswith(("_dim", "_layers", "_heads"))})
    state = torch.load(folder / "model.pt", weights_only=False)["model"]
    ref.write_checkpoint(tmp_path / "old.pt", partial, _legacy_layout(state))
    model, _ = import_fairseq(
        tmp_path / "old.pt", folder, tmp_path / "old.keras", bpe_codes=folder / "bpecodes"
    )
    expected = reference.logits(torch.tensor(SOURCE), torch.tensor(TARGET_INPUT)).numpy()
    np.testing.assert_allclose(_logits(model, SOURCE, TARGET_INPUT), expected, atol=1e-4)


class TrainingMeter:
    """Stands for fairseq's meters in a checkpoint's extra_state: a class torch won't load."""

    def __init__(self, value):
        self.value = value


@BACKEND_INDEPENDENT
@pytest.mark.parametrize("zip_format", [True, False])
def test_checkpoint_is_read_without_running_its_classes(tmp_path, zip_format):
    import enum

    from keras_transformer.pretrained.fairseq.checkpoint import (
        UnreadObject,
        checkpoint_settings,
        load_checkpoint,
    )

    Activation = enum.Enum("Activation", {"relu": "relu", "gelu": "gelu"})
    globals()["Activation"] = Activation  # picklable by name
    Activation.__module__, Activation.__qualname__ = __name__, "Activation"
    args = ref.tiny_args("transformer", activation_fn=Activation.gelu)
    checkpoint = {
        "args": ref.argparse.Namespace(**args),
        "model": {"encoder.version": torch.tensor([3.0])},
        "extra_state": {"train_meters": {"loss": TrainingMeter(2.5)}},
    }
    path = tmp_path / "checkpoint.pt"
    torch.save(checkpoint, path, _use_new_zipfile_serialization=zip_format)
    loaded = load_checkpoint(path)
    assert isinstance(loaded["extra_state"]["train_meters"]["loss"], UnreadObject)
    model, task = checkpoint_settings(loaded, path)
    assert model["arch"] == "transformer" and model["activation_fn"] == "gelu"
    assert task["source_lang"] == "en"


@only_under("tensorflow", "refused in this process; other backends export in a subprocess")
def test_export_is_refused_in_one_line(imported, capsys):
    from keras_transformer.commands.export import main as export_main

    folder = imported["transformer_shared"][3]
    for export_format in ("saved_model", "ctranslate2"):
        output = folder / f"export_{export_format}"
        with pytest.raises(SystemExit) as exit_info:
            export_main(
                ["--model", str(folder / "model.keras"), "--output", str(output), "--format",
                 export_format]
            )  # fmt: skip
        lines = capsys.readouterr().err.strip().splitlines()
        assert exit_info.value.code == 2 and "cannot be exported" in lines[-1], lines
        assert not output.exists()


@BACKEND_INDEPENDENT
def test_sentencepiece_model_with_joint_dictionary(tmp_path):
    """fairseq's `--bpe sentencepiece`: pieces of one model, ids from the dictionary."""
    import io

    import sentencepiece as spm

    sentences = ["the new world is low", "a newer world", "hello low world"] * 30
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=30,
        model_type="bpe", bos_id=-1, eos_id=-1,
    )  # fmt: skip
    processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
    pieces = [processor.id_to_piece(i) for i in range(1, processor.get_piece_size())]
    (tmp_path / "sentencepiece.bpe.model").write_bytes(model.getvalue())
    for language in ("en", "de"):
        ref.write_dictionary(tmp_path / f"dict.{language}.txt", pieces[::-1])
    symbols = ref.read_dictionary(tmp_path / "dict.en.txt")
    args = ref.tiny_args(
        "transformer", share_all_embeddings=True, bpe="sentencepiece", tokenizer="space"
    )
    state = ref.random_state_dict(args, len(symbols), len(symbols))
    ref.write_checkpoint(tmp_path / "model.pt", args, state, style="cfg")
    (tmp_path / "bpecodes").write_text(CODES, encoding="utf-8")  # not the checkpoint's kind
    model, tokenizer = import_fairseq(tmp_path / "model.pt", tmp_path, tmp_path / "spm.keras")
    text = "hello newer world"
    # fairseq: `" ".join(sp.EncodeAsPieces(x))`, then the dictionary's index of each piece.
    expected = [symbols.index(piece) for piece in processor.encode_as_pieces(text)]
    assert [int(i) for i in tokenizer([text])[0]] == expected
    assert tokenizer.detokenize([expected + [ref.EOS]]) == [text]
    assert tokenizer.bos_id == tokenizer.eos_id == ref.EOS and tokenizer.pad_id == ref.PAD
    reference = ref.Reference(state, args)
    source = [expected + [ref.EOS]]
    logits = reference.logits(torch.tensor(source), torch.tensor([[ref.EOS, 5, 6]])).numpy()
    np.testing.assert_allclose(_logits(model, source, [[ref.EOS, 5, 6]]), logits, atol=1e-4)
