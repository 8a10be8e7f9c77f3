"""docs/pretrained.md's commands, on tiny models in the published formats.

In place of the downloads, the page's folder gets `opus-mt-en-de`, a tiny random Marian model
written by transformers' `save_pretrained` (tokenizer files from tests/marian_folder.py), and
`wmt16.en-de.joined-dict.transformer`, a tiny `transformer_vaswani_wmt_en_de_big` checkpoint
in fairseq's layout with a joint dictionary and BPE codes (tests/fairseq_reference.py). The
page's blocks then run in order (tests/docs_runner.py), `train` with tiny settings appended.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
from docs_blocks import ROOT, parse_page

from keras_transformer.synthetic import write_synthetic_corpus

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("subword_nmt")

import fairseq_reference as ref  # noqa: E402
from marian_folder import write_marian_tokenizer_files  # noqa: E402

TESTS = os.path.dirname(os.path.abspath(__file__))
PAGE = os.path.join(ROOT, "docs", "pretrained.md")
# Appended to the page's `keras-transformer train` (the last flag wins): a few steps.
TINY_TRAINING = [
    "--max-steps", "3", "--warmup-steps", "2", "--token-budget", "256",
    "--checkpoint-every-steps", "1", "--verbose", "0", "--pipeline-override",
    "bucket_growth=1.5", "--valid-max-sentences", "2", "--max-extra-length", "5",
]  # fmt: skip
# And to `translate`: random tiny models rarely end a sentence; 5 tokens beyond the input's.
COMMAND_SHIM = f"""#!/usr/bin/env bash
if [ "${{1:-}}" = train ]; then
    exec "{sys.executable}" -m keras_transformer "$@" {" ".join(TINY_TRAINING)}
fi
if [ "${{1:-}}" = translate ]; then
    exec "{sys.executable}" -m keras_transformer "$@" --max-extra-length 5
fi
exec "{sys.executable}" -m keras_transformer "$@"
"""
FAIRSEQ_FOLDER = "wmt16.en-de.joined-dict.transformer"
ON_TENSORFLOW = pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow",
    reason="the page's commands start their own processes; they run under TensorFlow only",
)


def write_marian_folder(folder):
    """A `save_pretrained` folder of a tiny random OPUS-MT-like model (swish, scaled)."""
    _, _, vocabulary = write_marian_tokenizer_files(folder, seed=0)
    pad = len(vocabulary) - 1
    config = transformers.MarianConfig(
        vocab_size=len(vocabulary), d_model=16, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
        decoder_ffn_dim=32, activation_function="swish", max_position_embeddings=128,
        pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0, scale_embedding=True,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.MarianMTModel(config).save_pretrained(folder)


def write_fairseq_archive(folder):
    """What the WMT16 archive holds: model.pt, dict.en.txt, dict.de.txt, bpecodes."""
    folder.mkdir()
    words = ref.EN_WORDS + [word for word in ref.DE_WORDS if word not in ref.EN_WORDS]
    for language in ("en", "de"):
        ref.write_dictionary(folder / f"dict.{language}.txt", words)
    (folder / "bpecodes").write_text(ref.CODES, encoding="utf-8")
    args = ref.tiny_args("transformer_vaswani_wmt_en_de_big", share_all_embeddings=True)
    rows = len(ref.read_dictionary(folder / "dict.en.txt"))
    ref.write_checkpoint(folder / "model.pt", args, ref.random_state_dict(args, rows, rows))


def environment(work):
    shims = work / ".bin"
    shims.mkdir()
    (shims / "keras-transformer").write_text(COMMAND_SHIM)
    (shims / "keras-transformer").chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join([ROOT, TESTS]),
        "KERAS_BACKEND": "tensorflow",
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }


@ON_TENSORFLOW
@pytest.mark.slow  # ten commands, each starting TensorFlow, and a training run: minutes
def test_the_page_runs_on_tiny_published_models(tmp_path):
    work, data = tmp_path / "page", tmp_path / "data"
    work.mkdir()
    write_synthetic_corpus(data, train_size=300, valid_size=10, test_size=12, seed=3)
    for language in ("en", "de"):  # the page's newstest2014: the tiny test split
        shutil.copy(data / f"test.{language}", data / f"newstest2014.{language}")
        shutil.copy(data / f"test.{language}", work / f"test.{language}")
    write_marian_folder(work / "opus-mt-en-de")
    write_fairseq_archive(work / FAIRSEQ_FOLDER)
    page = parse_page(PAGE)
    assert page.tested_by == "tests/test_pretrained_doc.py"
    substitutions = {"data/my-domain": str(data), "data/wmt14": str(data)}
    blocks = []
    for block in page.runnable():
        code = block.code
        for old, new in substitutions.items():
            code = code.replace(old, new)
        blocks.append({**vars(block), "code": code, "page": "docs/pretrained.md"})
    assert [block["language"] for block in blocks] == ["bash"] * 4 + ["python"] + ["bash"] * 2
    (work / ".blocks.json").write_text(json.dumps(blocks))
    env = environment(work)
    result = subprocess.run(
        [sys.executable, os.path.join(TESTS, "docs_runner.py"), ".blocks.json"],
        cwd=work, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-6000:])
    check_outputs(work, result.stdout)
    check_fairseq_model_is_not_fine_tuned(work, env, data)


def check_outputs(work, output):
    imported = work / "opus-mt-en-de.keras"
    assert len((work / "test.hyp.de").read_text(encoding="utf-8").splitlines()) == 12
    # evaluate's lines: OPUS-MT's BLEU and chrF, then the newstest2014 BLEU and tokenized BLEU.
    assert "chrF = " in output and "tokenized BLEU = " in output
    assert output.count("\nBLEU = ") == 3  # and the fine-tuning run's test score
    run = work / "runs" / "opus-mt-my-domain"
    settings = json.loads((run / "config.json").read_text())
    assert settings["init_from"]["sha256"] == hashlib.sha256(imported.read_bytes()).hexdigest()
    assert settings["model"]["final_logits_bias"] and settings["model"]["activation"] == "swish"
    assert settings["experiment"]["optimization"]["train_steps"] == 3
    assert (run / "model.keras").is_file() and (run / "saved_model" / "saved_model.pb").is_file()
    assert (work / "serving" / "opus-mt-my-domain" / "1" / "saved_model.pb").is_file()
    assert (work / "serving" / "opus-mt" / "source.spm").is_file()
    assert len((work / "newstest2014.hyp.de").read_text(encoding="utf-8").splitlines()) == 12


def check_fairseq_model_is_not_fine_tuned(work, env, data):
    """The page says so: a Python tokenizer cannot train; one line, status 2."""
    result = subprocess.run(
        ["keras-transformer", "train", "--init-from", "wmt16-en-de.keras", "--data-dir",
         str(data), "--output-dir", "runs/refused"],
        cwd=work, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-3000:]
    error = result.stderr.strip().splitlines()[-1]
    assert "--init-from wmt16-en-de.keras: its tokenizer (MosesBpeTokenizer)" in error
    assert not (work / "runs" / "refused").exists()
