"""`load_translator` and the names `translate --model` and `import marian` take.

Each kind of source (a `.keras` file, a run directory, a Marian folder, a fairseq checkpoint
folder, a Hugging Face id) must translate as the long way does: `keras-transformer import`
writing a model file, `load_translation_model` reading it back, and a `Translator` built on it.
The Hugging Face id is found offline in a cache this test writes in huggingface_hub's layout
(`models--ORG--NAME/snapshots/REVISION/...`, `refs/main`); nothing goes to the network.
"""

import os
import shutil
import subprocess
import sys

import pytest
from conftest import BACKEND_INDEPENDENT
from marian_folder import write_marian_tokenizer_files

import keras_transformer as kt
from keras_transformer.commands.import_marian import main as marian_main
from keras_transformer.commands.translate import main as translate_main
from keras_transformer.decoding import Translator
from keras_transformer.export import load_translation_model
from keras_transformer.pretrained import hub
from keras_transformer.pretrained.marian import import_marian
from keras_transformer.pretrained.model_source import find_model_source, is_hub_id

torch = pytest.importorskip("torch", reason="the tiny Marian folder is written by transformers")
transformers = pytest.importorskip("transformers", reason="writes the tiny Marian folder")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HUB_ID = "Helsinki-NLP/opus-mt-en-de"
REVISION = "0123456789abcdef0123456789abcdef01234567"
SENTENCES = ["The dog sleeps.", "Two men talk in the garden.", ""]
# Random tiny models rarely stop: a few tokens beyond the input's keep decoding short.
DECODING = {"max_extra_length": 4}


def write_marian_folder(folder):
    """A tiny random OPUS-MT-like `save_pretrained` folder (swish, scaled embeddings)."""
    _, _, vocabulary = write_marian_tokenizer_files(folder, seed=0)
    pad = len(vocabulary) - 1
    config = transformers.MarianConfig(
        vocab_size=len(vocabulary), d_model=16, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
        decoder_ffn_dim=32, activation_function="swish", max_position_embeddings=64,
        pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0, scale_embedding=True,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.MarianMTModel(config).save_pretrained(folder)


def write_hub_cache(cache, folder, repo_id=HUB_ID):
    """`folder`'s files as huggingface_hub caches a download of `repo_id` at `main`."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    shutil.copytree(folder, repo / "snapshots" / REVISION)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)


def reference(model_file, sentences=SENTENCES):
    """The long way: the imported file read back, and a Translator built on it.

    Returns the best translations and their scores (the scores tell apart models that a
    random tiny model's repetitive output would not).
    """
    model, tokenizer = load_translation_model(model_file, compile=False)
    return translations(Translator(model, tokenizer, **DECODING), sentences)


def translations(translator, sentences=SENTENCES):
    return [best[0] for best in translator.translate_n_best(sentences, verbose=0)]


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    """The Marian folder, its imported model file and that file's translations."""
    root = tmp_path_factory.mktemp("load_translator")
    folder = root / "opus-mt-en-de"
    write_marian_folder(folder)
    model_file = root / "imported.keras"
    import_marian(folder, model_file)
    return {"folder": folder, "model_file": model_file, "expected": reference(model_file)}


@pytest.fixture
def offline_cache(tmp_path, marian, monkeypatch):
    """huggingface_hub set offline on a cache holding the Marian folder as `HUB_ID`."""
    huggingface_hub = pytest.importorskip("huggingface_hub")
    cache = tmp_path / "hub"
    write_hub_cache(cache, marian["folder"])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    # The process may have imported huggingface_hub, which reads both when imported.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    hub.hub_snapshot.cache_clear()
    yield cache
    hub.hub_snapshot.cache_clear()


@BACKEND_INDEPENDENT
def test_file_run_directory_and_marian_folder_translate_as_the_import(marian, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(marian["model_file"], run / "model.keras")
    for source in (marian["model_file"], run, marian["folder"], str(marian["folder"])):
        translator = kt.load_translator(source, **DECODING)
        assert translations(translator) == marian["expected"], source
    assert find_model_source(run).path == str(run / "model.keras")
    assert find_model_source(marian["folder"]).kind == "marian"


@BACKEND_INDEPENDENT
def test_hugging_face_id_loads_offline_from_the_cache(marian, offline_cache):
    translator = kt.load_translator(HUB_ID, **DECODING)
    assert translations(translator) == marian["expected"]
    texts = [text for text, _ in marian["expected"]]
    assert kt.load_translator(HUB_ID, **DECODING).translate(SENTENCES, verbose=0) == texts
    snapshot = offline_cache / "models--Helsinki-NLP--opus-mt-en-de" / "snapshots" / REVISION
    assert find_model_source(HUB_ID) == kt.pretrained.ModelSource(HUB_ID, "marian", str(snapshot))
    with pytest.raises(ValueError) as error:
        find_model_source("Helsinki-NLP/opus-mt-en-fr")
    message = str(error.value)
    assert message.startswith("Helsinki-NLP/opus-mt-en-fr: not in the Hugging Face cache")
    assert "HF_HUB_OFFLINE is set" in message and "\n" not in message


@BACKEND_INDEPENDENT
def test_hub_environment_variables_are_read_by_a_fresh_process(marian, tmp_path):
    pytest.importorskip("huggingface_hub")
    write_hub_cache(tmp_path / "hub", marian["folder"])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")}
    env["PYTHONPATH"] = ROOT
    code = (
        "import sys\n"
        "from keras_transformer.pretrained import find_model_source\n"
        f"print(find_model_source({HUB_ID!r}).path)\n"
        "print(sorted(name for name in ('keras', 'tensorflow', 'torch') if name in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    path, loaded = result.stdout.splitlines()
    assert path.endswith(os.path.join("snapshots", REVISION)) and path.startswith(str(tmp_path))
    assert loaded == "[]"  # found before any backend loads


@BACKEND_INDEPENDENT
def test_translate_and_import_marian_take_the_hugging_face_id(marian, offline_cache, tmp_path):
    source = tmp_path / "input.en"
    source.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    output = tmp_path / "output.de"
    flags = ["--input", str(source), "--output", str(output), "--max-extra-length", "4"]
    assert translate_main(["--model", HUB_ID, *flags]) == 0
    texts = [text for text, _ in marian["expected"]]
    assert output.read_text(encoding="utf-8").splitlines() == texts
    model_file = tmp_path / "from_hub.keras"
    assert marian_main([HUB_ID, "--output", str(model_file)]) == 0
    assert reference(model_file) == marian["expected"]


@BACKEND_INDEPENDENT
def test_without_huggingface_hub_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # `import` raises ImportError
    hub.huggingface_hub.cache_clear()
    hub.hub_snapshot.cache_clear()
    try:
        with pytest.raises(ImportError) as error:
            find_model_source("Someone/some-model")
    finally:
        hub.huggingface_hub.cache_clear()
    assert str(error.value) == (
        "a Hugging Face model id needs huggingface_hub: pip install 'keras-transformer-mt[hub]'"
    )


@BACKEND_INDEPENDENT
def test_names_that_are_no_model_get_one_line(marian, tmp_path, capsys, monkeypatch):
    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)  # `runs/bse` beside `runs/`: a mistyped path, not an id
    assert is_hub_id(HUB_ID) and not is_hub_id("runs/bse") and not is_hub_id("a/b/c")
    assert not is_hub_id("models/base.keras") and not is_hub_id("../x")
    partial = tmp_path / "partial"
    shutil.copytree(marian["folder"], partial)
    os.remove(partial / "model.safetensors")
    cases = [
        (tmp_path / "runs" / "bse", "no such file or directory (nor a Hugging Face id"),
        (partial, "missing model.safetensors or pytorch_model.bin; expected a Marian folder"),
        (tmp_path / "runs", "not a run directory (no model.keras; is the run finished?); nor a"),
    ]
    for path, message in [("runs/bse", cases[0][1]), *cases[1:]]:
        with pytest.raises(SystemExit) as exit_info:
            translate_main(["--model", str(path)])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err and err.count("\n") == 1, err
    with pytest.raises(SystemExit):
        marian_main(["no-such-folder", "--output", str(tmp_path / "x.keras")])
    err = capsys.readouterr().err
    assert "no-such-folder: not a folder, nor a Hugging Face id (ORG/NAME" in err


@BACKEND_INDEPENDENT
def test_fairseq_checkpoint_folder_translates_as_the_import(tmp_path):
    pytest.importorskip("subword_nmt")
    import fairseq_reference as ref

    from keras_transformer.pretrained.fairseq import import_fairseq

    folder = tmp_path / "wmt16.en-de"
    folder.mkdir()
    words = ref.EN_WORDS + [word for word in ref.DE_WORDS if word not in ref.EN_WORDS]
    for language in ("en", "de"):
        ref.write_dictionary(folder / f"dict.{language}.txt", words)
    (folder / "bpecodes").write_text(ref.CODES, encoding="utf-8")
    args = ref.tiny_args("transformer", share_all_embeddings=True)
    rows = len(ref.read_dictionary(folder / "dict.en.txt"))
    ref.write_checkpoint(folder / "model.pt", args, ref.random_state_dict(args, rows, rows))
    model_file = tmp_path / "imported.keras"
    import_fairseq(folder / "model.pt", folder, model_file)
    sentences = ["hello world!", "low newer"]
    expected = reference(model_file, sentences)
    for source in (folder, folder / "model.pt"):
        translator = kt.load_translator(source, **DECODING)
        assert translations(translator, sentences) == expected, source
    (folder / "model2.pt").write_bytes((folder / "model.pt").read_bytes())
    with pytest.raises(ValueError, match=r"several fairseq checkpoints \(model.pt, model2.pt\)"):
        find_model_source(folder)
