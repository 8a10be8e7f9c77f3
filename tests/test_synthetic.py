import collections
import itertools
import os
import re

import pytest
from conftest import BACKEND_INDEPENDENT

from keras_transformer.synthetic import generate_synthetic_pairs, write_synthetic_corpus
from keras_transformer.synthetic import lexicon as lex
from keras_transformer.synthetic.number_words import (
    english_cardinal,
    english_ordinal,
    english_year,
    german_cardinal,
    german_ordinal,
    german_year,
)
from keras_transformer.text import (
    ParallelCorpus,
    read_lines,
)

pytestmark = BACKEND_INDEPENDENT

# Written out by hand, not computed.
NUMBER_TABLE = {
    1: ("one", "eins"),
    7: ("seven", "sieben"),
    11: ("eleven", "elf"),
    16: ("sixteen", "sechzehn"),
    17: ("seventeen", "siebzehn"),
    21: ("twenty-one", "einundzwanzig"),
    30: ("thirty", "dreißig"),
    31: ("thirty-one", "einunddreißig"),
    67: ("sixty-seven", "siebenundsechzig"),
    99: ("ninety-nine", "neunundneunzig"),
    100: ("one hundred", "einhundert"),
    101: ("one hundred one", "einhunderteins"),
    345: ("three hundred forty-five", "dreihundertfünfundvierzig"),
    711: ("seven hundred eleven", "siebenhundertelf"),
    999: ("nine hundred ninety-nine", "neunhundertneunundneunzig"),
}
ORDINAL_TABLE = {
    1: ("first", "ersten"),
    2: ("second", "zweiten"),
    3: ("third", "dritten"),
    7: ("seventh", "siebten"),
    8: ("eighth", "achten"),
    12: ("twelfth", "zwölften"),
    16: ("sixteenth", "sechzehnten"),
    20: ("twentieth", "zwanzigsten"),
    21: ("twenty-first", "einundzwanzigsten"),
    30: ("thirtieth", "dreißigsten"),
}
YEAR_TABLE = {
    1900: ("nineteen hundred", "neunzehnhundert"),
    1905: ("nineteen oh five", "neunzehnhundertfünf"),
    1985: ("nineteen eighty-five", "neunzehnhundertfünfundachtzig"),
    2000: ("two thousand", "zweitausend"), 2007: ("two thousand seven", "zweitausendsieben"),
    2024: ("twenty twenty-four", "zweitausendvierundzwanzig"),
}  # fmt: skip

# An independent construction of German numbers, for the whole range.
UNITS = dict(
    enumerate(["eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun"], start=1)
)
TENS = dict(
    enumerate(
        ["zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig", "neunzig"],
        start=2,
    )
)
IRREGULAR = {10: "zehn", 11: "elf", 12: "zwölf", 16: "sechzehn", 17: "siebzehn"}


def reference_german(n):
    hundreds, rest = divmod(n, 100)
    words = (("ein" if hundreds == 1 else UNITS[hundreds]) + "hundert") if hundreds else ""
    tens, ones = divmod(rest, 10)
    if rest in IRREGULAR:
        return words + IRREGULAR[rest]
    if tens == 1:
        return words + UNITS[ones] + "zehn"
    if tens == 0:
        return words + (UNITS[ones] if ones else "")
    return words + ((("ein" if ones == 1 else UNITS[ones]) + "und") if ones else "") + TENS[tens]


def reference_ordinal(n):
    special = {1: "ersten", 3: "dritten", 7: "siebten", 8: "achten"}
    return special.get(n) or reference_german(n) + ("ten" if n < 20 else "sten")


ENGLISH_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
)
ENGLISH_TENS = "twenty thirty forty fifty sixty seventy eighty ninety"
ENGLISH_VALUES = {word: value for value, word in enumerate(ENGLISH_ONES.split())} | {
    word: 10 * value for value, word in enumerate(ENGLISH_TENS.split(), start=2)
}
# The days of the month, written out by hand, not computed.
ENGLISH_DAY_ORDINALS = (
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
    "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth "
    "twenty-first twenty-second twenty-third twenty-fourth twenty-fifth twenty-sixth "
    "twenty-seventh twenty-eighth twenty-ninth thirtieth thirty-first"
)
ENGLISH_ORDINALS = {word: day for day, word in enumerate(ENGLISH_DAY_ORDINALS.split(), start=1)}


def parse_english(words):
    """Value of English number words, e.g. ["three", "hundred", "forty-five"] -> 345."""
    value = 0
    for word in words:
        for part in word.split("-"):
            value = value * 100 if part == "hundred" else value + ENGLISH_VALUES[part]
    return value


def parse_english_year(words):
    if words[:2] == ["two", "thousand"]:
        return 2000 + parse_english(words[2:])
    century = parse_english(words[:1])
    rest = [w for w in words[1:] if w != "oh"]
    return century * 100 + (0 if rest == ["hundred"] else parse_english(rest))


@pytest.fixture(scope="module")
def pairs():
    return generate_synthetic_pairs(3000, seed=21)


def words(sentence):
    return [word.strip(",.") for word in sentence.split()]


def test_number_words_against_hand_table():
    for n, (english, german) in NUMBER_TABLE.items():
        assert english_cardinal(n) == english and german_cardinal(n) == german
    for n, (english, german) in ORDINAL_TABLE.items():
        assert english_ordinal(n) == english and german_ordinal(n) == german
    for year, (english, german) in YEAR_TABLE.items():
        assert english_year(year) == english and german_year(year) == german
    for n in range(1, 1000):
        assert german_cardinal(n) == reference_german(n), n
        assert parse_english(english_cardinal(n).split()) == n
    for n in range(1, 100):
        assert german_ordinal(n) == reference_ordinal(n), n
    with pytest.raises(ValueError, match="n=1000"):
        german_cardinal(1000)


def test_deterministic_from_seed():
    first = generate_synthetic_pairs(200, seed=3)
    assert first == generate_synthetic_pairs(200, seed=3)
    assert first != generate_synthetic_pairs(200, seed=4)
    # A longer corpus from the same seed extends the shorter one.
    longer = generate_synthetic_pairs(300, seed=3)
    assert (longer[0][:200], longer[1][:200]) == first
    assert len(set(first[0])) == 200


def test_numbers_dates_and_years_translate(pairs):
    checked = collections.Counter()
    number_words = set(ENGLISH_VALUES) | {"hundred", "oh", "thousand"}
    of_months = {("of", month[0]): month for month in lex.MONTHS}
    for english, german in zip(*pairs, strict=True):
        tokens, raw, expected = words(english), english.split(), []
        i = 0
        while i < len(tokens):
            month = of_months.get(tuple(tokens[i + 1 : i + 3]))
            if month:  # the 3rd of May
                # A misspelt ordinal must fail here, not be skipped as a non-number.
                assert tokens[i] in ENGLISH_ORDINALS, english
                expected.append(f"am {reference_ordinal(ENGLISH_ORDINALS[tokens[i]])} {month[1]}")
                checked["date"] += 1
                i += 3
                continue
            run = []
            while i < len(tokens) and all(p in number_words for p in tokens[i].lower().split("-")):
                run.append(tokens[i].lower())
                i += 1
                if raw[i - 1].endswith(","):  # a fronted year ends at its comma
                    break
            if not run:
                i += 1
            elif (
                i > len(run)
                and tokens[i - len(run) - 1].lower() == "in"
                # A year ends its clause; a count is followed by its noun.
                and (i == len(tokens) or tokens[i] == "because" or raw[i - 1].endswith(","))
            ):
                year = parse_english_year(run)
                expected.append(
                    f"im Jahr neunzehnhundert{reference_german(year - 1900)}"
                    if year < 2000
                    else f"im Jahr zweitausend{reference_german(year - 2000)}"
                )
                checked["year"] += 1
            else:
                expected.append(reference_german(parse_english(run)))
                checked["count"] += 1
        for phrase in expected:
            assert re.search(rf"(^|\s){phrase}(\s|,|\.)", german, re.IGNORECASE), (
                english,
                german,
                phrase,
            )
    assert min(checked.values()) > 50, checked


def finite_forms():
    forms = {"habe", "hat", "haben"}
    for verb in lex.VERBS:
        forms |= {verb.german_first, verb.german_third, verb.german_plural}
        forms |= {
            verb.particle + form
            for form in (verb.german_first, verb.german_third, verb.german_plural)
        }
    return forms


def test_word_order(pairs):
    finite = finite_forms()
    fronted = {"Today": "Heute", "Tomorrow": "Morgen", "Yesterday": "Gestern"}
    checked = collections.Counter()
    for english, german in zip(*pairs, strict=True):
        english_words, german_words = words(english), words(german)
        if " that " in english or " because " in english:
            # Subordinate clauses (always last here) are verb-final.
            assert german_words[-1] in finite, german
            checked["verb final"] += 1
        first = english_words[0]
        if first in fronted and english.split()[0].endswith(","):
            # Verb second: adverbial, finite verb, then the subject.
            assert german_words[0] == fronted[first] and german_words[1] in finite, german
            checked["verb second"] += 1
        if not re.search(r" (that|because) ", english) and re.search(r" (calls|call) ", english):
            assert german_words[-1] == "an", german  # "ruft ... an": the particle goes last
            checked["separable"] += 1
        main_english = english.split(" because ")[0]
        if re.search(r" (has|have) ", main_english) and " that " not in english:
            participles = {verb.german_participle for verb in lex.VERBS}
            main = german.split(", weil")[0].rstrip(".").split()
            assert main[-1] in participles, german  # "hat ... gekauft"
            checked["participle"] += 1
    assert min(checked.values()) > 30, checked


# Article + gender -> adjective ending (weak after der-words, mixed after ein-words).
ENDINGS = {
    ("der", "m"): "e", ("der", "f"): "en", ("die", "f"): "e", ("das", "n"): "e",
    ("den", "m"): "en", ("dem", "m"): "en", ("dem", "n"): "en",
    ("ein", "m"): "er", ("ein", "n"): "es", ("eine", "f"): "e", ("einen", "m"): "en",
    ("einem", "m"): "en", ("einem", "n"): "en", ("einer", "f"): "en",
}  # fmt: skip
CONTRACTED = {"im": "dem", "vom": "dem", "zum": "dem"}


def test_article_adjective_noun_agreement(pairs):
    nouns = {n.german: n.gender for n in lex.NOUNS if n.german != n.german_plural}
    for modifier, (_, heads) in lex.COMPOUNDS.items():
        for head in heads:
            noun = lex.compound(modifier, head)
            if noun.german != noun.german_plural:
                nouns[noun.german] = noun.gender  # gender of the head: die Küchentür
    stems = {adjective.german_stem for adjective in lex.ADJECTIVES}
    checked = 0
    for german in pairs[1]:
        tokens = words(german)
        for i, token in enumerate(tokens):
            if token not in nouns:
                continue
            adjective = tokens[i - 1] if tokens[i - 1][:1].islower() and i >= 2 else None
            article = tokens[i - 2] if adjective else tokens[i - 1]
            article = CONTRACTED.get(article, article).lower()
            if article not in {a for a, _ in ENDINGS}:
                continue  # e.g. a preposition or verb before a bare noun
            gender = nouns[token]
            assert (article, gender) in ENDINGS, (german, token)
            if adjective:
                ending = ENDINGS[article, gender]
                assert adjective.endswith(ending) and adjective[: -len(ending)] in stems, german
            checked += 1
    assert checked > 1000
    assert "der Küchentisch" in " ".join(pairs[1]) or "den Küchentisch" in " ".join(pairs[1])


def test_english_articles_and_dative_plural(pairs):
    checked = collections.Counter()
    numbers = {reference_german(n) for n in range(2, 1000)}
    for english, german in zip(*pairs, strict=True):
        tokens = words(english)
        for article, following in itertools.pairwise(tokens):
            if article.lower() in ("a", "an"):
                assert (article.lower() == "an") == (following[0] in "aeiou"), english
                checked["a/an"] += 1
        # Dative plural nouns end in -n (or -s): "mit drei roten Äpfeln", "neben den Kindern".
        # After mit/neben (dative), "den" or a number word marks a plural.
        pattern = r"\b(?:mit|neben) (\w+) (?:\w+en )?([A-ZÄÖÜ]\w+)"
        for determiner, noun in re.findall(pattern, german):
            if determiner == "den" or determiner in numbers:
                assert noun.endswith(("n", "s")), german
                checked["dative plural"] += 1
    assert min(checked.values()) > 100, checked


def test_write_synthetic_corpus(tmp_path):
    paths = write_synthetic_corpus(tmp_path / "synthetic", train_size=50, valid_size=10,
                                   test_size=10, seed=1)  # fmt: skip
    corpora = {split: ParallelCorpus.from_files(*paths[split]) for split in paths}
    assert {split: len(c) for split, c in corpora.items()} == {"train": 50, "valid": 10,
                                                               "test": 10}  # fmt: skip
    english, german = generate_synthetic_pairs(70, seed=1)
    assert list(corpora["train"].sources) == english[:50]
    assert list(corpora["test"].targets) == german[60:]
    assert not set(corpora["train"].sources) & set(corpora["test"].sources)
    assert sorted(os.listdir(tmp_path / "synthetic")) == sorted(
        f"{split}.{language}" for split in ("train", "valid", "test") for language in ("en", "de")
    )


def test_write_failure_leaves_nothing(tmp_path, monkeypatch):
    calls = []
    real_fsync = os.fsync

    def failing_fsync(descriptor):
        calls.append(descriptor)
        if len(calls) == 4:
            raise OSError("disk full")
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="disk full"):
        write_synthetic_corpus(tmp_path, train_size=5, valid_size=5, test_size=5)
    assert os.listdir(tmp_path) == []
    monkeypatch.undo()
    (tmp_path / "train.en").write_text("old\n")
    with pytest.raises(ValueError, match="train_size"):
        write_synthetic_corpus(tmp_path, train_size=-1)
    assert read_lines(tmp_path / "train.en") == ["old"]
