"""The translations committed in results/ score what the docs print.

Each `results/<model>/` holds a model's translations of its test sets and `scores.json`, the
figures docs/results.md (and the README, for the quickstart) print. The tests rescore the
files with sacreBLEU against the references: the quickstart's generated test set (rebuilt
from the recipe's seed) and Multi30k's in `../shared/data` when it is there. The blind sets'
references are kept elsewhere: only their line counts are checked.
"""

import json
from pathlib import Path

import pytest
from conftest import BACKEND_INDEPENDENT
from sacrebleu.metrics import BLEU, CHRF

from keras_transformer.evaluation.tokenized_bleu import multi30k_bleu

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
SHARED_DATA = ROOT.parent / "shared" / "data"
DOCS = {"README.md": ROOT / "README.md", "docs/results.md": ROOT / "docs" / "results.md"}
MODELS = sorted(path.parent.name for path in RESULTS.glob("*/scores.json"))
# Scores do not depend on the Keras backend.
pytestmark = BACKEND_INDEPENDENT
BLIND_SETS = {"test_2017_mscoco": 461, "test_2018_flickr": 1071}


def _lines(path):
    with open(path, encoding="utf-8") as file:
        return file.read().splitlines()


def _rescored(hypotheses, references, language, lowercase):
    """{metric: score rounded as the docs print it} of one test set."""
    bleu = BLEU(lowercase=lowercase).corpus_score(hypotheses, [references])
    chrf = CHRF(lowercase=lowercase).corpus_score(hypotheses, [references])
    return {
        "bleu": round(bleu.score, 2),
        "chrf": round(chrf.score, 2),
        "multi30k_bleu": lambda: round(multi30k_bleu(hypotheses, references, language), 2),
    }


def _references(record, set_name, tmp_path):
    language = record["target_language"]
    if record["references"] == "quickstart":
        from keras_transformer.synthetic.corpus import write_synthetic_corpus

        train, valid, test = record["synthetic_sizes"]
        paths = write_synthetic_corpus(
            tmp_path, train_size=train, valid_size=valid, test_size=test, seed=record["seed"]
        )
        return _lines(paths[set_name][1])
    path = SHARED_DATA / record["references"] / f"{set_name}.{language}"
    if not path.exists():
        pytest.skip(f"{path} is not here (Multi30k's references live in ../shared/data)")
    return _lines(path)


def test_every_model_has_its_files():
    assert "quickstart" in MODELS
    for model in MODELS:
        record = json.loads((RESULTS / model / "scores.json").read_text(encoding="utf-8"))
        language = record["target_language"]
        for set_name in [*record["scores"], *record.get("blind_sets", [])]:
            assert (RESULTS / model / f"{set_name}.{language}.hyp").is_file(), (model, set_name)
        assert record["command"], model


@pytest.mark.parametrize("model", MODELS)
def test_committed_translations_score_what_the_docs_print(model, tmp_path):
    record = json.loads((RESULTS / model / "scores.json").read_text(encoding="utf-8"))
    language = record["target_language"]
    docs = {name: DOCS[name].read_text(encoding="utf-8") for name in record["printed_in"]}
    for set_name, expected in record["scores"].items():
        hypotheses = _lines(RESULTS / model / f"{set_name}.{language}.hyp")
        references = _references(record, set_name, tmp_path)
        assert len(hypotheses) == len(references), (model, set_name)
        rescored = _rescored(hypotheses, references, language, record.get("lowercase", False))
        rescored = {
            metric: value() if callable(value) else value
            for metric, value in rescored.items()
            if metric in expected
        }
        assert rescored == expected, (model, set_name)
        for name, text in docs.items():
            for metric in record["printed_in"][name]:
                value = f"{expected[metric]:.2f}"
                assert value in text, f"{name} does not print {model} {set_name} {metric} {value}"


@pytest.mark.parametrize("model", MODELS)
def test_blind_sets_have_a_line_per_source(model):
    record = json.loads((RESULTS / model / "scores.json").read_text(encoding="utf-8"))
    for set_name in record.get("blind_sets", []):
        hypotheses = _lines(RESULTS / model / f"{set_name}.{record['target_language']}.hyp")
        source = SHARED_DATA / "multi30k-blind" / f"{set_name}.en"
        expected = len(_lines(source)) if source.exists() else BLIND_SETS[set_name]
        assert len(hypotheses) == expected, (model, set_name)
        assert all(line.strip() for line in hypotheses), f"{model} {set_name}: a blank line"
