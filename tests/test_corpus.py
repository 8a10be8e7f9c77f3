import gzip
import logging
import os
import sys

import pytest
from conftest import BACKEND_INDEPENDENT

from keras_transformer.text import (
    CleaningSummary,
    ParallelCorpus,
    clean_parallel_corpus,
    load_tfds_corpus,
    read_lines,
)

pytestmark = BACKEND_INDEPENDENT


def write(path, data):
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def test_plain_and_gzip_files_read_the_same(tmp_path):
    text = "Ein Hund.\nZwei Katzen\u2028im Haus.\r\nDrei Vögel"  # no final newline
    plain = write(tmp_path / "a.de", text)
    packed = tmp_path / "a.de.renamed"  # detected from its content, not its name
    packed.write_bytes(gzip.compress(text.encode("utf-8")))
    expected = ["Ein Hund.", "Zwei Katzen\u2028im Haus.", "Drei Vögel"]
    assert read_lines(plain) == expected
    assert read_lines(packed) == expected
    assert read_lines(write(tmp_path / "b", "x\n\ny\n")) == ["x", "", "y"]


def test_from_files(tmp_path):
    source = write(tmp_path / "train.en", "A dog.\nTwo cats.\n")
    target = write(tmp_path / "train.de.gz", gzip.compress(b"Ein Hund.\nZwei Katzen.\n"))
    corpus = ParallelCorpus.from_files(source, target)
    assert list(corpus) == [("A dog.", "Ein Hund."), ("Two cats.", "Zwei Katzen.")]
    assert len(corpus) == 2 and corpus[1] == ("Two cats.", "Zwei Katzen.")
    assert corpus.source_name == str(source)


def test_line_count_mismatch_names_both_files_and_counts(tmp_path):
    source = write(tmp_path / "train.en", "a\nb\nc\n")
    target = write(tmp_path / "train.de", "x\ny\n")
    with pytest.raises(ValueError, match=r"train\.en' has 3 lines.*train\.de' has 2 lines"):
        ParallelCorpus.from_files(source, target)


def test_invalid_utf8_strict_and_replace(tmp_path, caplog):
    source = write(tmp_path / "s.en", "one\ntwo\nthree\n")
    target = write(tmp_path / "t.de", b"eins\nzwei \xe4\xff\ndrei\n")
    with pytest.raises(ValueError, match=r"t\.de', line 2, byte 6"):
        ParallelCorpus.from_files(source, target)
    with caplog.at_level(logging.WARNING, logger="keras_transformer.text"):
        corpus = ParallelCorpus.from_files(source, target, errors="replace")
    assert corpus.targets == ("eins", "zwei \ufffd\ufffd", "drei")
    assert "1 line(s)" in caplog.text and "line 2" in caplog.text
    with pytest.raises(ValueError, match="errors"):
        ParallelCorpus.from_files(source, target, errors="ignore")


def test_missing_empty_and_corrupt_files(tmp_path):
    present = write(tmp_path / "present.en", "a\n")
    with pytest.raises(FileNotFoundError, match=r"target file .*gone\.de"):
        ParallelCorpus.from_files(present, tmp_path / "gone.de")
    with pytest.raises(FileNotFoundError, match=r"source file .*no\.en.*target file .*no\.de"):
        ParallelCorpus.from_files(tmp_path / "no.en", tmp_path / "no.de")
    empty_source, empty_target = write(tmp_path / "e.en", ""), write(tmp_path / "e.de", "")
    with pytest.raises(ValueError, match=r"empty.*e\.en.*e\.de"):
        ParallelCorpus.from_files(empty_source, empty_target)
    truncated = tmp_path / "cut.de.gz"
    packed = gzip.compress("\n".join(f"Zeile {i}" for i in range(500)).encode())
    truncated.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(ValueError, match=r"cut\.de\.gz.*truncated or corrupt gzip"):
        read_lines(truncated)


def test_constructor_checks():
    with pytest.raises(ValueError, match="'sources' has 2, 'targets' has 1"):
        ParallelCorpus(["a", "b"], ["x"])
    with pytest.raises(TypeError, match="item 1 of type bytes"):
        ParallelCorpus(["a", b"b"], ["x", "y"])


def test_write_is_all_or_nothing(tmp_path):
    corpus = ParallelCorpus(["a", "b"], ["x", "y"])
    corpus.write(tmp_path / "out.en", tmp_path / "out.de")
    assert ParallelCorpus.from_files(tmp_path / "out.en", tmp_path / "out.de") == ParallelCorpus(
        ["a", "b"], ["x", "y"], str(tmp_path / "out.en"), str(tmp_path / "out.de")
    )
    broken = ParallelCorpus(["c", "d"], ["z", "two\nlines"])
    with pytest.raises(ValueError, match=r"Line 2 .*out\.de.*newline"):
        broken.write(tmp_path / "out.en", tmp_path / "out.de")
    # Neither file changed (the source was fine but is only renamed after both succeed).
    assert read_lines(tmp_path / "out.en") == ["a", "b"]
    assert read_lines(tmp_path / "out.de") == ["x", "y"]
    assert sorted(os.listdir(tmp_path)) == ["out.de", "out.en"]


def reference_clean(pairs, max_length, ratio):
    """Independent restatement of the rules, returning the expected counts."""
    counts = {"kept": 0, "empty": 0, "too_long": 0, "ratio": 0}
    for source, target in pairs:
        a, b = len(source.split()), len(target.split())
        if a == 0 or b == 0:
            counts["empty"] += 1
        elif a > max_length or b > max_length:
            counts["too_long"] += 1
        elif max(a, b) / min(a, b) > ratio:
            counts["ratio"] += 1
        else:
            counts["kept"] += 1
    return counts


def test_cleaning_counts_every_drop(caplog):
    pairs = [
        ("a b c", "x y z"),
        ("", "x"),
        ("   ", "y"),
        ("a " * 12, "x " * 12),  # too long (12 > 10), ratio fine
        ("a", "x y z w"),  # ratio 4 > 3
        ("a b c d e f g h i j k l", "x"),  # too long wins over ratio
        ("  padded  ", " both sides "),
        ("a b c", "x y z w v u v w x"),  # ratio 3: kept
    ]
    corpus = ParallelCorpus([s for s, _ in pairs], [t for _, t in pairs])
    with caplog.at_level(logging.WARNING, logger="keras_transformer.text"):
        cleaned, summary = clean_parallel_corpus(corpus, max_length=10, max_length_ratio=3.0)
    expected = reference_clean(pairs, 10, 3.0)
    assert isinstance(summary, CleaningSummary)
    counts = (summary.kept, summary.dropped_empty, summary.dropped_too_long, summary.dropped_ratio)
    assert counts == (expected["kept"], expected["empty"], expected["too_long"], expected["ratio"])
    assert summary.total == len(pairs) == summary.kept + summary.dropped
    assert summary.examples == {"empty": (2, 3), "too_long": (4, 6), "ratio": (5,)}
    assert summary.stripped == 1
    assert cleaned.sources == ("a b c", "padded", "a b c")
    assert cleaned.targets[1] == "both sides"
    assert "dropped 5" in caplog.text and "empty side" in str(summary)


def test_cleaning_rules_can_be_disabled_and_use_any_length():
    corpus = ParallelCorpus(["a " * 300, "abc", "abc"], ["x", "abcdefghij", "abcd"])
    _, summary = clean_parallel_corpus(corpus, max_length=None, max_length_ratio=None)
    assert summary.kept == 3 and summary.dropped == 0
    assert "longer than max_length: off" in str(summary)
    _, by_chars = clean_parallel_corpus(
        corpus, max_length=None, max_length_ratio=3.0, length_function=len
    )
    assert by_chars.dropped_ratio == 2


def test_cleaning_everything_away_is_an_error():
    with pytest.raises(ValueError, match="dropped every pair"):
        clean_parallel_corpus(ParallelCorpus(["", "a"], ["x", ""]))
    with pytest.raises(ValueError, match="max_length_ratio"):
        clean_parallel_corpus(ParallelCorpus(["a"], ["x"]), max_length_ratio=0.5)


def test_tfds_source_with_mock_data():
    tfds = pytest.importorskip("tensorflow_datasets")
    with tfds.testing.mock_data(num_examples=6):
        corpus = load_tfds_corpus("wmt14_translate/de-en", "train")
        reference = list(tfds.as_numpy(tfds.load("wmt14_translate/de-en", split="train")))
        limited = load_tfds_corpus("wmt14_translate/de-en", "train", max_examples=2)
        with pytest.raises(ValueError, match=r"source_language='fr'.*\['de', 'en'\]"):
            load_tfds_corpus("wmt14_translate/de-en", "train", source_language="fr")
    assert len(corpus) == 6 and len(limited) == 2
    assert list(corpus.sources) == [example["en"].decode() for example in reference]
    assert list(corpus.targets) == [example["de"].decode() for example in reference]
    assert corpus.source_name == "tfds:wmt14_translate/de-en[train]:en"


def test_tfds_missing_dependency_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)
    with pytest.raises(ImportError, match=r"keras-transformer-mt\[tfds\]"):
        load_tfds_corpus()


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_atomic_writes_get_the_usual_permissions(tmp_path):
    from keras_transformer.text.text_files import write_bytes_atomic, write_lines_atomic

    previous = os.umask(0o022)
    try:
        new = tmp_path / "new" / "vocabulary.model"
        write_bytes_atomic(new, b"proto")
        lines = tmp_path / "test.hyp"
        write_lines_atomic([(lines, ["ein Hund", "zwei Katzen"])])
    finally:
        os.umask(previous)
    # As `open` would create them (0666 less the umask), not mkstemp's 0600.
    assert new.stat().st_mode & 0o777 == 0o644
    assert lines.stat().st_mode & 0o777 == 0o644
    assert lines.read_text(encoding="utf-8") == "ein Hund\nzwei Katzen\n"

    # A replaced file keeps the mode its owner gave it.
    os.chmod(new, 0o640)
    write_bytes_atomic(new, b"proto 2")
    assert new.stat().st_mode & 0o777 == 0o640 and new.read_bytes() == b"proto 2"

    # A failed write leaves the old file (content and mode) and no temporary file.
    with pytest.raises(ValueError, match=r"Line 2 .*test\.hyp.*newline"):
        write_lines_atomic([(lines, ["gut", "kaputt\nhier"])])
    assert lines.read_text(encoding="utf-8") == "ein Hund\nzwei Katzen\n"
    assert sorted(os.listdir(tmp_path)) == ["new", "test.hyp"]
    assert os.listdir(new.parent) == ["vocabulary.model"]


def test_line_breaks_inside_texts_become_spaces():
    from keras_transformer.text.text_files import join_line_breaks

    texts = ["plain", "two\nlines", "windows\r\nbreak", "old\rmac", "", "\n"]
    joined, changed = join_line_breaks(iter(texts))
    assert joined == ["plain", "two lines", "windows break", "old mac", "", " "]
    assert changed == 4


def test_command_line_translation_with_a_line_break_stays_aligned(tmp_path, monkeypatch, capsys):
    import types

    import keras_transformer.commands.translate
    import keras_transformer.decoding
    import keras_transformer.pretrained.model_source
    from keras_transformer.cli import main
    from keras_transformer.models.transformer_config import TransformerConfig

    class EchoTranslator:
        truncated = 0

        def __init__(self, model, tokenizer, **kwargs):
            pass

        def translate_n_best(self, sentences, verbose=0):
            return [[(sentence.replace("|", "\n"), 0.0)] for sentence in sentences]

    model = types.SimpleNamespace(config=TransformerConfig(vocabulary_size=8))
    monkeypatch.setattr(keras_transformer.commands.translate, "_model_sources", lambda *a: [None])
    monkeypatch.setattr(
        keras_transformer.pretrained.model_source, "load_model_source", lambda *a: (model, 0)
    )
    monkeypatch.setattr(keras_transformer.decoding, "Translator", EchoTranslator)
    source = tmp_path / "input.txt"
    source.write_text("first\nsec|ond\nthird\n", encoding="utf-8")
    output = tmp_path / "output.txt"
    args = ["translate", "--model", "unused.keras", "--input", str(source), "--output", str(output)]
    assert main(args) == 0
    assert output.read_text(encoding="utf-8").split("\n") == ["first", "sec ond", "third", ""]
    assert "1 translations had line breaks" in capsys.readouterr().err
