"""Extra training pairs (`--extra-source/--extra-target`) and their tag (`--tag-extra`)."""

import shutil

import pytest
import sentencepiece
from conftest import BACKEND_INDEPENDENT
from test_command_startup import run_command

from keras_transformer.experiment import DataConfig, ExperimentConfig, ExtraDataConfig
from keras_transformer.experiment import run_phases as phases
from keras_transformer.experiment.inputs.extra_pairs import (
    EXTRA_TAG,
    EXTRA_TAG_PIECE,
    training_files,
)
from keras_transformer.experiment.inputs.input_checks import check_inputs
from keras_transformer.experiment.inputs.run_config_file import (
    check_resumed_settings,
    data_fingerprint,
    run_settings,
    write_run_config,
)
from keras_transformer.experiment.inputs.split_files import SplitFiles
from keras_transformer.synthetic import write_synthetic_corpus

pytestmark = BACKEND_INDEPENDENT


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    """A tiny corpus, and 30 extra pairs (the first 30 test pairs, reversed word order)."""
    root = tmp_path_factory.mktemp("bt")
    write_synthetic_corpus(root, train_size=200, valid_size=5, test_size=40, seed=2)
    for language in ("en", "de"):
        lines = (root / f"test.{language}").read_text(encoding="utf-8").splitlines()[:30]
        extra = [" ".join(reversed(line.split())) for line in lines]
        (root / f"synthetic.{language}").write_text("\n".join(extra) + "\n", encoding="utf-8")
    return root


def config_of(root, tmp_path, tag_extra=False, **data):
    extra = ExtraDataConfig(
        extra_source=str(root / "synthetic.en"),
        extra_target=str(root / "synthetic.de"),
        tag_extra=tag_extra,
    )
    data = DataConfig(data_dir=str(root), vocabulary_size=120, **data)
    return ExperimentConfig(
        output_dir=str(tmp_path / "run"), data=data, extra_data=extra, verbose=0
    )


def lines(path):
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("lowercase", [False, True])
def test_tagged_extra_pairs_join_the_training_data_with_the_tag_as_one_piece(
    corpus_dir, tmp_path, lowercase
):
    config = config_of(corpus_dir, tmp_path, tag_extra=True, vocabulary_lowercase=lowercase)
    splits = SplitFiles.find(config.data, config.data.data_dir, valid=False)
    _, _, corpus = phases.data(config, str(tmp_path), splits)
    train_en, extra_en = lines(corpus_dir / "train.en"), lines(corpus_dir / "synthetic.en")
    train_de, extra_de = lines(corpus_dir / "train.de"), lines(corpus_dir / "synthetic.de")
    assert len(corpus) == len(train_en) + len(extra_en) == 230
    assert list(corpus.sources) == train_en + [f"{EXTRA_TAG} {line}" for line in extra_en]
    assert list(corpus.targets) == train_de + extra_de  # targets are never tagged

    tokenizer = phases.vocabulary(config, corpus, str(tmp_path))
    processor = sentencepiece.SentencePieceProcessor(model_proto=tokenizer.proto)
    tag = processor.piece_to_id(EXTRA_TAG_PIECE)
    assert processor.id_to_piece(tag) == EXTRA_TAG_PIECE and not processor.is_unknown(tag)
    real, extra = corpus.sources[: len(train_en)], corpus.sources[len(train_en) :]
    extra_ids = processor.encode(list(extra))
    assert all(ids[0] == tag and tag not in ids[1:] for ids in extra_ids)
    assert all(tag not in ids for ids in processor.encode(list(real) + list(corpus.targets)))
    # The tag adds exactly one id: the rest is the untagged sentence's encoding.
    assert [ids[1:] for ids in extra_ids] == processor.encode(
        [line.lower() if lowercase else line for line in extra_en]
    )


def test_untagged_extra_pairs_are_counted_and_fingerprinted(corpus_dir, tmp_path):
    config = config_of(corpus_dir, tmp_path)
    splits = SplitFiles.find(config.data, config.data.data_dir, valid=False)
    _, _, corpus = phases.data(config, str(tmp_path), splits)
    assert list(corpus.sources[200:]) == lines(corpus_dir / "synthetic.en")
    files = training_files(config.extra_data, splits.train)
    settings = run_settings(config, config.pipeline_config(), data_files=files)
    assert sorted(settings["data"]) == ["synthetic.de", "synthetic.en", "train.de", "train.en"]
    assert settings["experiment"]["extra_data"]["extra_source"] == str(corpus_dir / "synthetic.en")
    # Extra files named as the training split's are fingerprinted each by its path.
    same_names = [str(corpus_dir / "train.en"), str(corpus_dir / "train.de")]
    (tmp_path / "bt").mkdir()
    for path in list(same_names):
        same_names.append(str(shutil.copy(path, tmp_path / "bt")))
    fingerprint = data_fingerprint(same_names)
    assert sorted(fingerprint) == sorted(same_names)
    # No extra pair: the training split alone, as before.
    assert training_files(ExtraDataConfig(), splits.train) == splits.train


def test_a_resume_on_edited_extra_files_is_refused(corpus_dir, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(corpus_dir, root)
    config = config_of(root, tmp_path)
    files = training_files(config.extra_data, (str(root / "train.en"), str(root / "train.de")))
    settings = run_settings(config, config.pipeline_config(), data_files=files)
    write_run_config(settings, str(tmp_path))
    check_resumed_settings(settings, str(tmp_path))  # unchanged files resume
    with open(root / "synthetic.de", "a", encoding="utf-8") as file:
        file.write("noch eine\n")
    with open(root / "synthetic.en", "a", encoding="utf-8") as file:
        file.write("one more\n")
    edited = run_settings(config, config.pipeline_config(), data_files=files)
    with pytest.raises(ValueError, match=r"synthetic\.de was"):
        check_resumed_settings(edited, str(tmp_path))


def refusal(tmp_path, corpus_dir, *flags):
    """The stderr line of `train FLAGS` that exits with 2 before any backend loads."""
    out = tmp_path / "out"
    argv = ["train", "--data-dir", str(corpus_dir), "--output-dir", str(out), *flags]
    result, loaded = run_command(tmp_path, *argv)
    assert (result.returncode, result.stdout, loaded) == (2, "", []), result.stderr
    assert result.stderr.count("\n") == 1 and not out.exists(), result.stderr
    return result.stderr


def test_bad_extra_files_are_refused_in_one_line(corpus_dir, tmp_path):
    source = str(corpus_dir / "synthetic.en")
    absent = str(tmp_path / "absent.de")
    line = refusal(tmp_path, corpus_dir, "--extra-source", source, "--extra-target", absent)
    assert f"--extra-target {absent} does not exist" in line
    longer = tmp_path / "longer.de"
    longer.write_text((corpus_dir / "synthetic.de").read_text() + "noch eine\n")
    line = refusal(tmp_path, corpus_dir, "--extra-source", source, "--extra-target", str(longer))
    assert f"--extra-target {longer} has 31 lines but --extra-source {source} has 30" in line
    line = refusal(tmp_path, corpus_dir, "--extra-source", source)
    assert "--extra-source needs --extra-target" in line
    line = refusal(tmp_path, corpus_dir, "--tag-extra")
    assert "--tag-extra needs --extra-source and --extra-target" in line


def test_a_given_vocabulary_without_the_tag_is_refused(corpus_dir, tmp_path):
    untagged = config_of(corpus_dir, tmp_path)
    splits = SplitFiles.find(untagged.data, untagged.data.data_dir, valid=False)
    _, _, corpus = phases.data(untagged, str(tmp_path), splits)
    phases.vocabulary(untagged, corpus, str(tmp_path))  # no tag piece
    vocabulary = str(tmp_path / "vocabulary.model")
    flags = ["--extra-source", str(corpus_dir / "synthetic.en")]
    flags += ["--extra-target", str(corpus_dir / "synthetic.de"), "--tag-extra"]
    line = refusal(tmp_path, corpus_dir, *flags, "--vocabulary", vocabulary)
    assert f"needs the piece {EXTRA_TAG_PIECE!r}" in line and vocabulary in line


def test_an_init_from_model_without_the_tag_is_refused_and_one_with_it_passes(corpus_dir, tmp_path):
    from conftest import small_config

    from keras_transformer.export import save_translation_model
    from keras_transformer.models import Seq2SeqTransformer

    paths = {}
    for tag_extra in (False, True):
        config = config_of(corpus_dir, tmp_path / str(tag_extra), tag_extra=tag_extra)
        splits = SplitFiles.find(config.data, config.data.data_dir, valid=False)
        _, _, corpus = phases.data(config, str(tmp_path), splits)
        tokenizer = phases.vocabulary(config, corpus, str(tmp_path / str(tag_extra)))
        model = Seq2SeqTransformer(small_config(tokenizer.vocabulary_size()))
        model.build()
        paths[tag_extra] = str(tmp_path / f"tagged-{tag_extra}.keras")
        save_translation_model(model, tokenizer, paths[tag_extra])
    flags = ["--extra-source", str(corpus_dir / "synthetic.en")]
    flags += ["--extra-target", str(corpus_dir / "synthetic.de"), "--tag-extra"]
    line = refusal(tmp_path, corpus_dir, *flags, "--init-from", paths[False])
    assert f"needs the piece {EXTRA_TAG_PIECE!r}" in line and paths[False] in line
    tagged = config_of(corpus_dir, tmp_path, tag_extra=True)
    check_inputs(tagged.replace(model={"init_from": paths[True], "model_overrides": {}}))
