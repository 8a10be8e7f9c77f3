import collections
import json
import math
import re
import runpy
import subprocess
import sys

import numpy as np
import pytest
import sacrebleu
import sacremoses
import tensorflow as tf
from conftest import BACKEND_INDEPENDENT, numpy_perplexity, random_token_ids

from keras_transformer import Seq2SeqTransformer
from keras_transformer.commands.evaluate import main
from keras_transformer.evaluation import (
    chrf,
    moses_tokenize,
    multi30k_bleu,
    multi_bleu,
    perplexity,
    read_lines,
    reference_sets,
    sacre_bleu,
    score_files,
    split_hyphenated_compounds,
    tokenized_bleu,
)

HYPOTHESES = [
    "Die Regierung hat am Dienstag ein neues Gesetz zur E-Mail-Überwachung vorgestellt.",
    "„Wir müssen die Bürger schützen“, sagte der Minister in Berlin.",
    "Das Rich-Text-Format wird von vielen Programmen unterstützt.",
    "Die Preise für Bio-Lebensmittel sind im Jahr 2014 um 3,5 Prozent gestiegen.",
    "Er war nicht da \u2013 sie auch nicht.",
    "Kann man das Open-Source-Projekt auch kommerziell nutzen?",
]
REFERENCES = [
    "Die Regierung stellte am Dienstag ein neues Gesetz zur E-Mail-Überwachung vor.",
    "„Wir müssen die Bürgerinnen und Bürger schützen“, sagte der Minister in Berlin.",
    "Das Rich-Text-Format wird von zahlreichen Programmen unterstützt.",
    "Die Preise für Bio-Lebensmittel stiegen 2014 um 3,5 Prozent.",
    "Er war nicht da \u2013 und sie auch nicht.",
    "Darf man das Open-Source-Projekt auch kommerziell nutzen?",
]
SECOND_REFERENCES = [
    "Am Dienstag hat die Regierung ein neues Gesetz zur Überwachung von E-Mails vorgestellt.",
    "„Wir müssen die Bürger schützen“, sagte der Minister in Berlin.",
    "Viele Programme unterstützen das Rich-Text-Format.",
    "Die Preise für Bio-Lebensmittel sind 2014 um 3,5 Prozent gestiegen.",
    "Er war nicht da, sie auch nicht.",
    "Kann das Open-Source-Projekt auch kommerziell genutzt werden?",
]


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


@pytest.fixture
def files(tmp_path):
    return {
        "hypotheses": write_lines(tmp_path / "hyp.de", HYPOTHESES),
        "references": write_lines(tmp_path / "ref.de", REFERENCES),
        "second_references": write_lines(tmp_path / "ref2.de", SECOND_REFERENCES),
    }


def sacrebleu_command(references, hypotheses, *options):
    """The sacrebleu command line's JSON scores, at 6 decimals."""
    command = [sys.executable, "-m", "sacrebleu", *references, "-i", hypotheses, "-w", "6"]
    result = subprocess.run([*command, *options], capture_output=True, text=True, check=True)
    scores = json.loads(result.stdout)
    return scores if isinstance(scores, list) else [scores]


def reference_multi_bleu(hypotheses, references, lowercase=False):
    """multi-bleu.perl's BLEU, written out independently of sacrebleu."""

    def ngrams(words, n):
        return collections.Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))

    correct, total = [0] * 4, [0] * 4
    hypothesis_length = reference_length = 0
    for index, hypothesis in enumerate(hypotheses):
        words = (hypothesis.lower() if lowercase else hypothesis).split()
        refs = [(r[index].lower() if lowercase else r[index]).split() for r in references]
        # Closest reference length, the shorter one on ties.
        reference_length += min((abs(len(words) - len(r)), len(r)) for r in refs)[1]
        hypothesis_length += len(words)
        for n in range(1, 5):
            max_counts = collections.Counter()
            for ref in refs:
                max_counts |= ngrams(ref, n)
            counts = ngrams(words, n)
            total[n - 1] += sum(counts.values())
            correct[n - 1] += sum(min(c, max_counts[g]) for g, c in counts.items())
    if min(correct) == 0:
        return 0.0
    brevity = 1.0
    if hypothesis_length < reference_length:
        brevity = math.exp(1 - reference_length / hypothesis_length)
    log_precision = sum(math.log(c / t) for c, t in zip(correct, total, strict=True)) / 4
    return 100 * brevity * math.exp(log_precision)


@BACKEND_INDEPENDENT
@pytest.mark.parametrize("num_references", [1, 2])
def test_bleu_and_chrf_agree_with_the_sacrebleu_command(files, num_references):
    reference_files = [files["references"], files["second_references"]][:num_references]
    expected_bleu, expected_chrf = sacrebleu_command(
        reference_files, files["hypotheses"], "-m", "bleu", "chrf"
    )
    scores = score_files(files["hypotheses"], reference_files)
    assert scores.bleu == pytest.approx(expected_bleu["score"], abs=1e-5)
    assert scores.bleu_signature == expected_bleu["signature"]
    assert f"nrefs:{num_references}|case:mixed" in scores.bleu_signature
    assert scores.chrf == pytest.approx(expected_chrf["score"], abs=1e-5)
    assert scores.chrf_signature == expected_chrf["signature"]
    assert (scores.num_segments, scores.num_references) == (6, num_references)
    in_memory = [REFERENCES, SECOND_REFERENCES][:num_references]
    assert sacre_bleu(HYPOTHESES, in_memory)[0] == scores.bleu
    assert chrf(HYPOTHESES, in_memory)[0] == scores.chrf
    assert 10 < scores.bleu < 100


@BACKEND_INDEPENDENT
def test_lowercase_bleu_and_chrf_agree_with_the_sacrebleu_command(files, tmp_path, capsys):
    expected_bleu, expected_chrf = sacrebleu_command(
        [files["references"]], files["hypotheses"], "-m", "bleu", "chrf", "-lc",
        "--chrf-lowercase",
    )  # fmt: skip
    scores = score_files(files["hypotheses"], files["references"], ("bleu", "chrf"), lowercase=True)
    assert scores.bleu == pytest.approx(expected_bleu["score"], abs=1e-5)
    assert scores.bleu_signature == expected_bleu["signature"]
    assert scores.chrf == pytest.approx(expected_chrf["score"], abs=1e-5)
    assert scores.chrf_signature == expected_chrf["signature"]
    assert "case:lc" in scores.bleu_signature and "case:lc" in scores.chrf_signature
    # A case-folded system's output: the cased metric punishes what the lowercased ignores.
    folded = write_lines(tmp_path / "folded.de", [line.lower() for line in HYPOTHESES])
    folded_scores = score_files(folded, files["references"], ("bleu", "chrf"), lowercase=True)
    assert (folded_scores.bleu, folded_scores.chrf) == (scores.bleu, scores.chrf)
    assert score_files(folded, files["references"], "bleu").bleu < scores.bleu - 5
    # The command: --lowercase, or by default the setting a --run-dir was trained with.
    argv = ["--hypotheses", folded, "--references", files["references"], "--metric", "bleu"]
    assert main([*argv, "--lowercase", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bleu"] == scores.bleu
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"experiment": {"vocabulary_lowercase": True}}))
    assert main([*argv, "--run-dir", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bleu"] == scores.bleu
    assert main([*argv, "--run-dir", str(run), "--no-lowercase", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bleu"] < scores.bleu - 5


@BACKEND_INDEPENDENT
def test_tokenized_bleu_is_multi_bleu_of_the_tokenized_files(files, tmp_path):
    def prepare(lines):
        tokenized = moses_tokenize(lines, "de", replace_unicode_punctuation=True)
        return [split_hyphenated_compounds(line) for line in tokenized]

    hypotheses = prepare(HYPOTHESES)
    references = [prepare(REFERENCES), prepare(SECOND_REFERENCES)]
    assert hypotheses[2] == (
        "Das Rich ##AT##-##AT## Text ##AT##-##AT## Format wird von vielen Programmen unterstützt ."
    )
    hypothesis_file = write_lines(tmp_path / "hyp.atat", hypotheses)
    reference_files = [write_lines(tmp_path / f"ref{i}.atat", r) for i, r in enumerate(references)]
    (expected,) = sacrebleu_command(
        reference_files, hypothesis_file, "-m", "bleu", "-tok", "none", "-s", "none", "--force"
    )
    score = tokenized_bleu(HYPOTHESES, [REFERENCES, SECOND_REFERENCES], language="de")
    assert score == pytest.approx(expected["score"], abs=1e-5)
    assert score == pytest.approx(reference_multi_bleu(hypotheses, references), abs=1e-9)
    from_files = score_files(files["hypotheses"], [files["references"], files["second_references"]])
    assert from_files.tokenized_bleu == score
    # Split compounds earn partial matches, so the paper's variant runs higher here.
    unsplit = tokenized_bleu(HYPOTHESES, [REFERENCES, SECOND_REFERENCES], split_compounds=False)
    assert score > unsplit


@BACKEND_INDEPENDENT
def test_compound_splitting_matches_a_hand_tokenized_line():
    line = "Das Rich-Text-Format ist für E-Mails (x-y-z) geeignet - sagt er, z. B. 3-4 Mal."
    (tokenized,) = moses_tokenize([line], "de")
    assert tokenized == (
        "Das Rich-Text-Format ist für E-Mails ( x-y-z ) geeignet - sagt er , z. B. 3-4 Mal ."
    )
    # Matches are leftmost and non-overlapping, as with perl's s{}{}g: "x-y-z" keeps "y-z".
    assert split_hyphenated_compounds(tokenized) == (
        "Das Rich ##AT##-##AT## Text ##AT##-##AT## Format ist für E ##AT##-##AT## Mails "
        "( x ##AT##-##AT## y-z ) geeignet - sagt er , z. B. 3 ##AT##-##AT## 4 Mal ."
    )


@BACKEND_INDEPENDENT
def test_multi_bleu_semantics():
    # Segment 1: references of 4 and 6 tokens are equally close to 5; the shorter counts.
    hypotheses = ["a b c d e", "the cat sat on the mat today", "The Dog"]
    references = [
        ["a b c d", "das ist ein test", "the dog"],
        ["a b c d e f", "the cat sat on a mat today", "a dog"],
    ]
    for lowercase in (False, True):
        expected = reference_multi_bleu(hypotheses, references, lowercase)
        assert multi_bleu(hypotheses, references, lowercase) == pytest.approx(expected, abs=1e-9)
    assert multi_bleu(["b a"], ["a b"]) == 0.0  # no 4-gram match and no smoothing
    assert multi30k_bleu(["Ein Hund rennt."], ["ein hund rennt ."]) == pytest.approx(100.0)


@BACKEND_INDEPENDENT
def test_multi30k_bleu_prepares_text_as_the_datasets_tokenized_files():
    # The dataset's tok files are lowercase.perl | normalize-punctuation.perl -l de |
    # tokenizer.perl -l de of its raw files: German quotes and dashes become ASCII, then
    # the tokenizer escapes the quotes. Its line for this raw reference:
    reference = 'Ein Schild mit der Aufschrift "Stop" - hier.'
    tok_file_line = "ein schild mit der aufschrift &quot; stop &quot; - hier ."
    tokenized = moses_tokenize([reference.lower()], "de")
    assert multi_bleu(tokenized, [tok_file_line]) == pytest.approx(100.0)
    hypothesis = "Ein Schild mit der Aufschrift „Stop“ \u2013 hier."  # an en dash
    assert multi30k_bleu([hypothesis], [reference]) == pytest.approx(100.0)
    # Without the normalization, the quotes and the dash are 3 of 11 tokens wrong.
    unnormalized = moses_tokenize([hypothesis.lower()], "de")
    assert multi_bleu(unnormalized, [tok_file_line]) < 50.0


@BACKEND_INDEPENDENT
def test_reference_sets_errors():
    assert reference_sets(["a"], ["b"]) == [["b"]]
    expected = r"`references\[1\]` has 1 segments but `hypotheses` has 2"
    with pytest.raises(ValueError, match=expected):
        reference_sets(["a", "b"], [["a", "b"], ["a"]])
    with pytest.raises(TypeError, match="`hypotheses` must be a sequence of str"):
        sacre_bleu("a b", ["a b"])
    with pytest.raises(ValueError, match="`hypotheses` is empty"):
        chrf([], [])


@BACKEND_INDEPENDENT
def test_line_count_mismatch_names_both_files_and_counts(files, tmp_path):
    short = write_lines(tmp_path / "short.de", REFERENCES[:4])
    with pytest.raises(ValueError) as error:
        score_files(files["hypotheses"], [files["references"], short])
    message = str(error.value)
    assert files["hypotheses"] in message and "has 6 lines" in message
    assert short in message and "has 4" in message


@BACKEND_INDEPENDENT
def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.de"
    path.write_bytes("Grüße\n".encode() + "Straße\n".encode("latin-1"))
    expected = rf"Invalid UTF-8 in the file '{path}', line 2, byte 5"
    with pytest.raises(ValueError, match=expected):
        read_lines(path)
    crlf = tmp_path / "crlf.de"
    crlf.write_bytes(b"a b \r\nc\r\n")
    assert read_lines(crlf) == ["a b", "c"]


@BACKEND_INDEPENDENT
def test_command_prints_scores(files, capsys):
    argv = ["--hypotheses", files["hypotheses"], "--references", files["references"]]
    assert main([*argv, "--metric", "bleu", "chrf", "tokenized_bleu", "multi30k_bleu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" = ")[0] for line in lines] == [
        "BLEU",
        "chrF",
        "tokenized BLEU",
        "Multi30k BLEU",
    ]
    # Each printed value against the metric computed independently: sacrebleu's API for
    # BLEU and chrF; sacremoses tokenization then `reference_multi_bleu` for the others.
    bleu_metric, chrf_metric = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    bleu = bleu_metric.corpus_score(HYPOTHESES, [REFERENCES]).score
    chrf_score = chrf_metric.corpus_score(HYPOTHESES, [REFERENCES]).score
    tokenizer, normalizer = sacremoses.MosesTokenizer("de"), sacremoses.MosesPunctNormalizer("de")

    def tokenize(lines, replace_punctuation):
        if replace_punctuation:
            lines = [normalizer.replace_unicode_punct(line) for line in lines]
        return [tokenizer.tokenize(line, return_str=True) for line in lines]

    def split(lines):  # get_ende_bleu.sh's perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g'
        return [re.sub(r"(\S)-(\S)", r"\1 ##AT##-##AT## \2", line) for line in lines]

    tokenized = reference_multi_bleu(
        split(tokenize(HYPOTHESES, True)), [split(tokenize(REFERENCES, True))]
    )
    lowercased = reference_multi_bleu(
        tokenize(HYPOTHESES, False), [tokenize(REFERENCES, False)], lowercase=True
    )
    expected = [
        (bleu, f"({bleu_metric.get_signature()})"),
        (chrf_score, f"({chrf_metric.get_signature()})"),
        (tokenized, "(Moses-tokenized, compounds split: comparable with the paper)"),
        (lowercased, "(lowercased, Moses-tokenized)"),
    ]
    assert len({round(score, 2) for score, _ in expected}) == 4  # a swap would show
    for line, (score, note) in zip(lines, expected, strict=True):
        printed, printed_note = line.split(" = ")[1].split(" ", 1)
        assert printed == f"{score:.2f}" and printed_note == note, (line, score)
    assert main([*argv, "--metric", "bleu", "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["bleu"] == pytest.approx(sacre_bleu(HYPOTHESES, REFERENCES)[0])
    assert scores["chrf"] is None


FRENCH_HYPOTHESES = [
    "L'homme a dit « oui » à l'enfant.",
    "Un chien court sur l'herbe verte devant une clôture blanche.",
    "Aujourd'hui, c'est l'été : il fait chaud.",
]
FRENCH_REFERENCES = [
    "L'homme a répondu « oui » à l'enfant.",
    "Un chien court dans l'herbe verte devant une barrière blanche.",
    "Aujourd'hui, c'est l'été, il fait très chaud.",
]


@BACKEND_INDEPENDENT
def test_command_tokenizes_with_the_references_suffix_language(tmp_path, capsys):
    hypotheses = write_lines(tmp_path / "test.fr.hyp", FRENCH_HYPOTHESES)

    def multi30k(references, *flags):
        argv = ["--hypotheses", hypotheses, "--references", references]
        assert main([*argv, "--metrics", "multi30k_bleu", "--json", *flags]) == 0
        return json.loads(capsys.readouterr().out)["multi30k_bleu"]

    french = write_lines(tmp_path / "test.fr", FRENCH_REFERENCES)
    untyped = write_lines(tmp_path / "references.txt", FRENCH_REFERENCES)
    # French and German rules split the apostrophes differently, so the default can show.
    assert multi30k(french, "--language", "fr") != multi30k(french, "--language", "de")
    assert multi30k(french) == multi30k(french, "--language", "fr")
    assert multi30k(french) == pytest.approx(
        multi30k_bleu(FRENCH_HYPOTHESES, [FRENCH_REFERENCES], "fr")
    )
    assert multi30k(untyped) == multi30k(untyped, "--language", "de")  # no code: German


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--hypotheses", "{hyp}"], "the following arguments are required: --references"),
        (["--hypotheses", "{hyp}", "--references", "{ref}", "--metric", "ter"], "invalid choice"),
        (["--hypotheses", "missing.de", "--references", "{ref}"], "does not exist"),
        (["--hypotheses", "{hyp}", "--references", "{short}"], "Line counts differ"),
    ],
)
def test_command_bad_invocations_give_one_line(files, tmp_path, capsys, argv, expected):
    short = write_lines(tmp_path / "short.de", REFERENCES[:2])
    paths = {"hyp": files["hypotheses"], "ref": files["references"], "short": short}
    with pytest.raises(SystemExit) as exit_info:
        main([arg.format(**paths) for arg in argv])
    assert exit_info.value.code != 0
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and expected in stderr
    assert stderr.startswith("keras-transformer evaluate: error:")


@BACKEND_INDEPENDENT
@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")
def test_module_runs_as_a_command(files, capsys, monkeypatch):
    def run(*args):
        # runpy runs the module as `python -m` does, without a second TensorFlow import.
        monkeypatch.setattr(sys, "argv", ["keras_transformer.evaluation", *args])
        with pytest.raises(SystemExit) as exit_info:
            runpy.run_module("keras_transformer.evaluation", run_name="__main__")
        return exit_info.value.code, capsys.readouterr()

    argv = ["--hypotheses", files["hypotheses"], "--references"]
    code, output = run(*argv, files["references"], "--metric", "bleu")
    assert code == 0 and output.out.startswith("BLEU = ")
    code, output = run(*argv, "missing.de")
    assert code == 2
    # An alias of `python -m keras_transformer evaluate`: the command's own messages.
    assert output.err == (
        "keras-transformer evaluate: error: The file does not exist: 'missing.de'\n"
    )


def perplexity_batches(config, rng, num_batches=3):
    batches = []
    for _ in range(num_batches):
        inputs = {
            "encoder_token_ids": random_token_ids(rng, 4, 7, config.vocabulary_size),
            "decoder_token_ids": random_token_ids(rng, 4, 6, config.vocabulary_size),
        }
        labels = random_token_ids(rng, 4, 6, config.vocabulary_size)
        labels[0] = 0  # an all-padding row, as bucketed batches have
        batches.append((inputs, labels))
    return batches


def test_perplexity_matches_numpy(tiny_config):
    model = Seq2SeqTransformer(tiny_config.replace(dropout=0.3))  # must be off in evaluation
    batches = perplexity_batches(tiny_config, np.random.default_rng(0))
    expected = numpy_perplexity(model, batches)
    assert perplexity(model, batches) == pytest.approx(expected, rel=1e-5)
    assert expected > 1.0

    def generator():
        yield from batches

    signature = (
        {key: tf.TensorSpec((4, None), tf.int32) for key in batches[0][0]},
        tf.TensorSpec((4, None), tf.int32),
    )
    dataset = tf.data.Dataset.from_generator(generator, output_signature=signature)
    assert perplexity(model, dataset) == pytest.approx(expected, rel=1e-5)
    first_only = numpy_perplexity(model, batches[:1])
    assert perplexity(model, dataset.repeat(), steps=1) == pytest.approx(first_only, rel=1e-5)


def test_perplexity_errors(tiny_config):
    model = Seq2SeqTransformer(tiny_config)
    inputs, labels = perplexity_batches(tiny_config, np.random.default_rng(1), 1)[0]
    with pytest.raises(ValueError, match="no target token other than pad_id=0"):
        perplexity(model, [(inputs, np.zeros_like(labels))])
    with pytest.raises(ValueError, match=r"Batch 0: `inputs` must be a dict with keys"):
        perplexity(model, [({"encoder_token_ids": labels}, labels)])
    with pytest.raises(ValueError, match="must be an `\\(inputs, labels\\)` pair"):
        perplexity(model, [(inputs, labels, labels)])
