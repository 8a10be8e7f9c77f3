"""The built-in synthetic English-German corpus of the quickstart.

A small grammar generates English sentences and their German translations
(deterministically from a seed) that need real sequence-to-sequence skills:

- reordering: verb-second after a fronted time adverbial ("Heute kauft der
  Mann ..."), verb-final subordinate clauses ("..., weil das Kind einen
  Kuchen braucht"), participles and separable particles at the clause end
  ("hat ... gekauft", "ruft ... an"), time before object in the middle field;
- compounding: "kitchen table" -> "Küchentisch", numbers as one word with
  the units first ("twenty-one" -> "einundzwanzig"), years
  ("nineteen eighty-five" -> "neunzehnhundertfünfundachtzig");
- agreement: article and adjective endings by gender, case and number
  ("den roten Ball", "einem alten Mann", "mit drei roten Äpfeln"), a
  compound's gender from its head, verb forms by person, dative plural -n,
  contractions ("im Haus"), date ordinals ("am einundzwanzigsten März").

The vocabulary is small (about 150 English words), so a small Transformer
learns the task quickly.

A second domain, `domain="requests"`, draws polite requests from the same
words: "Please buy the red ball on Friday." -> "Bitte kaufen Sie am Freitag
den roten Ball." A model trained on the statements of the default domain has
seen neither the sentence form nor "please", "bitte", the formal "Sie"
after the verb: the fine-tuning test adapts it to the new domain.
"""

import os
import random
from pathlib import Path

from keras_transformer.synthetic import lexicon as lex
from keras_transformer.synthetic.number_words import (
    english_cardinal,
    english_ordinal,
    english_year,
    german_cardinal,
    german_ordinal,
    german_year,
)
from keras_transformer.text.text_files import write_lines_atomic

SPLITS = ("train", "valid", "test")
LANGUAGES = ("en", "de")
# "statements": the quickstart's corpus; "requests": polite requests ("Please ...").
DOMAINS = ("statements", "requests")


class _Grammar:
    """Draws one sentence pair at a time from a `random.Random`."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.compounds = [
            lex.compound(modifier, head)
            for modifier, (_, heads) in sorted(lex.COMPOUNDS.items())
            for head in heads
        ]

    def chance(self, probability):
        return self.rng.random() < probability

    def noun(self, categories):
        compounds = [noun for noun in self.compounds if noun.category in categories]
        if compounds and self.chance(0.25):
            return self.rng.choice(compounds)
        return self.rng.choice([noun for noun in lex.NOUNS if noun.category in categories])

    def noun_phrase(self, categories, case):
        """Returns (English words, German words, person "3sg" or "pl")."""
        noun = self.noun(categories)
        adjective = self.rng.choice(lex.ADJECTIVES) if self.chance(0.4) else None
        english_adjective = [adjective.english] if adjective else []
        determiner = self.rng.choices(
            ("definite", "indefinite", "definite_plural", "number"), (0.4, 0.25, 0.15, 0.2)
        )[0]
        gender = noun.gender
        if determiner in ("definite", "indefinite"):
            if determiner == "definite":
                english = ["the"]
                article = lex.DEFINITE[case][gender]
                ending = lex.WEAK_ENDINGS[case][gender]
            else:
                following = (english_adjective or noun.english.split())[0]
                english = ["an" if following[0] in "aeiou" else "a"]
                article = lex.INDEFINITE[case][gender]
                ending = lex.MIXED_ENDINGS[case][gender]
            english += english_adjective + noun.english.split()
            german = [article] + ([adjective.german_stem + ending] if adjective else [])
            return english, [*german, noun.german], "3sg"
        plural = noun.german_dative_plural if case == "dat" else noun.german_plural
        if determiner == "definite_plural":
            english = ["the"]
            german = [lex.DEFINITE[case]["pl"]]
            ending = lex.WEAK_ENDINGS[case]["pl"]
        else:
            count = self.rng.randint(2, 99) if self.chance(0.85) else self.rng.randint(100, 999)
            english = english_cardinal(count).split()
            german = [german_cardinal(count)]
            ending = lex.STRONG_PLURAL_ENDINGS[case]
        english += english_adjective + noun.english_plural.split()
        german += [adjective.german_stem + ending] if adjective else []
        return english, [*german, plural], "pl"

    def subject(self, animal_allowed):
        if self.chance(0.3):
            english, german, person = self.rng.choice(lex.PRONOUNS)
            return [english], [german], person
        categories = (lex.PERSON, lex.ANIMAL) if animal_allowed else (lex.PERSON,)
        return self.noun_phrase(categories, "nom")

    def prepositional_phrase(self):
        english_preposition, german_preposition, case, categories = self.rng.choice(
            lex.PREPOSITIONS
        )
        english, german, _ = self.noun_phrase(categories, case)
        contraction = lex.CONTRACTIONS.get((german_preposition, german[0]))
        if contraction and english[0] == "the":
            german = [contraction, *german[1:]]
        else:
            german = [german_preposition, *german]
        return english_preposition.split() + english, german

    def time_adverbial(self, perfect):
        kinds = ["simple", "weekday", "date"] + (["year"] if perfect else [])
        kind = self.rng.choice(kinds)
        if kind == "simple":
            english, german = self.rng.choice(
                lex.PERFECT_ADVERBS if perfect else lex.PRESENT_ADVERBS
            )
            return english.split(), german.split()
        if kind == "weekday":
            english, german = self.rng.choice(lex.WEEKDAYS)
            return ["on", english], ["am", german]
        if kind == "date":
            english_month, german_month, days = self.rng.choice(lex.MONTHS)
            day = self.rng.randint(1, days)
            english = ["on", "the", english_ordinal(day), "of", english_month]
            return english, ["am", german_ordinal(day, "en"), german_month]
        year = self.rng.randint(1900, 2030)
        return ["in", *english_year(year).split()], ["im", "Jahr", german_year(year)]

    def clause(self, subordinate):
        """Returns (English words, German words, fronted English adverbial or None)."""
        verb = self.rng.choice(lex.VERBS)
        perfect = self.chance(0.4)
        subject_english, subject_german, person = self.subject(verb.animal_subject)
        object_english, object_german, _ = self.noun_phrase(verb.objects, "acc")
        phrase_english, phrase_german = (
            self.prepositional_phrase() if self.chance(0.3) else ([], [])
        )
        adverb_english, adverb_german = (
            self.time_adverbial(perfect) if self.chance(0.5) else ([], [])
        )
        german_forms = {
            "1sg": verb.german_first,
            "3sg": verb.german_third,
            "pl": verb.german_plural,
        }
        if perfect:
            english_verb = ["has" if person == "3sg" else "have", *verb.english_participle.split()]
            finite = {"1sg": "habe", "3sg": "hat", "pl": "haben"}[person]
            right_bracket = [verb.german_participle]
            final_cluster = [verb.german_participle, finite]
        else:
            english_verb = (verb.english_third if person == "3sg" else verb.english).split()
            finite = german_forms[person]
            right_bracket = [verb.particle] if verb.particle else []
            final_cluster = [verb.particle + finite]
        english = subject_english + english_verb + object_english + phrase_english
        middle = object_german + phrase_german
        fronted = None
        if subordinate:
            german = subject_german + adverb_german + middle + final_cluster
            english += adverb_english
        elif adverb_english and self.chance(0.5):
            fronted = adverb_english
            german = [*adverb_german, finite, *subject_german, *middle, *right_bracket]
        else:
            german = [*subject_german, finite, *adverb_german, *middle, *right_bracket]
            english += adverb_english
        return english, german, fronted

    def sentence(self):
        template = self.rng.choices(("main", "reported", "because"), (0.5, 0.25, 0.25))[0]
        if template == "reported":
            english_subject, german_subject, person = self.subject(animal_allowed=False)
            verb = self.rng.choice(lex.REPORTING_VERBS)
            english_verb = verb[0] if person == "3sg" else verb[1]
            german_verb = {"1sg": verb[2], "3sg": verb[3], "pl": verb[4]}[person]
            clause_english, clause_german, _ = self.clause(subordinate=True)
            english = [*english_subject, english_verb, "that", *clause_english]
            german = [*german_subject, german_verb + ",", "dass", *clause_german]
        else:
            english, german, fronted = self.clause(subordinate=False)
            if fronted:
                english = [*fronted[:-1], fronted[-1] + ",", *english]
            if template == "because":
                clause_english, clause_german, _ = self.clause(subordinate=True)
                english = [*english, "because", *clause_english]
                german = [*german[:-1], german[-1] + ",", "weil", *clause_german]
        return _finish(english), _finish(german)

    def request(self):
        """A polite request: "Please call the dog today." -> "Bitte rufen Sie heute den Hund an."

        The formal imperative puts the plural verb form first, then "Sie", the
        middle field (time before object, as in `clause`) and a separable
        particle at the end; an optional "because" clause follows.
        """
        verb = self.rng.choice(lex.VERBS)
        object_english, object_german, _ = self.noun_phrase(verb.objects, "acc")
        phrase_english, phrase_german = (
            self.prepositional_phrase() if self.chance(0.3) else ([], [])
        )
        adverb_english, adverb_german = (
            self.time_adverbial(perfect=False) if self.chance(0.5) else ([], [])
        )
        english = ["please", *verb.english.split(), *object_english, *phrase_english]
        english += adverb_english
        german = ["bitte", verb.german_plural, "Sie", *adverb_german, *object_german]
        german += phrase_german + ([verb.particle] if verb.particle else [])
        if self.chance(0.25):
            clause_english, clause_german, _ = self.clause(subordinate=True)
            english = [*english, "because", *clause_english]
            german = [*german[:-1], german[-1] + ",", "weil", *clause_german]
        return _finish(english), _finish(german)


def _finish(words):
    text = " ".join(words)
    return text[0].upper() + text[1:] + "."


def generate_synthetic_pairs(num_pairs, seed=0, unique=True, domain="statements"):
    """Generates the synthetic English-German task.

    Args:
        num_pairs: int. Number of sentence pairs.
        seed: int. The same seed always gives the same pairs in the same order.
        unique: bool. Never repeat an English sentence (the German side is a
            function of the English one, so pairs are unique too).
        domain: "statements" (the quickstart's corpus) or "requests" (polite
            requests with the same words, a second domain to adapt a model to).

    Returns:
        `(english, german)`: two lists of `num_pairs` str.

    Example:

    >>> english, german = generate_synthetic_pairs(3, seed=0)
    >>> english[1], german[1]
    ('A man picks up the kitchen chairs because the beautiful woman has visited the shop.',
     'Ein Mann holt die Küchenstühle ab, weil die schöne Frau den Laden besucht hat.')
    """
    if isinstance(num_pairs, bool) or not isinstance(num_pairs, int) or num_pairs < 0:
        raise ValueError(f"`num_pairs` must be a non-negative int. Received: {num_pairs!r}")
    if domain not in DOMAINS:
        raise ValueError(f"`domain` must be one of {DOMAINS}. Received: domain={domain!r}")
    grammar = _Grammar(seed)
    draw = grammar.sentence if domain == "statements" else grammar.request
    english, german, seen = [], [], set()
    # The grammar has far more sentences than any corpus asks for; the bound
    # only turns a bug into an error instead of an endless loop.
    for _ in range(100 * num_pairs + 1000):
        if len(english) == num_pairs:
            break
        source, target = draw()
        if unique:
            if source in seen:
                continue
            seen.add(source)
        english.append(source)
        german.append(target)
    else:
        raise RuntimeError(f"Could not generate {num_pairs} unique pairs with seed={seed}.")
    return english, german


def write_synthetic_corpus(
    directory, *, train_size=20000, valid_size=1000, test_size=1000, seed=0, domain="statements"
):
    """Writes `{train,valid,test}.{en,de}` of the synthetic task into `directory`.

    The three splits share no sentence. All six files are written to
    temporary names first and renamed only once every write succeeded.

    Args:
        directory: str or `os.PathLike`. Created if missing.
        train_size: int. Training pairs.
        valid_size: int. Validation pairs.
        test_size: int. Test pairs.
        seed: int. Generator seed.
        domain: "statements" or "requests" (see `generate_synthetic_pairs`).

    Returns:
        A dict `{"train": (en_path, de_path), "valid": ..., "test": ...}` of `Path`s.

    Example:

    >>> paths = write_synthetic_corpus("data/synthetic", seed=0)
    >>> corpus = ParallelCorpus.from_files(*paths["train"])
    """
    sizes = {"train": train_size, "valid": valid_size, "test": test_size}
    for split, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"`{split}_size` must be a non-negative int. Received: {size!r}")
    english, german = generate_synthetic_pairs(sum(sizes.values()), seed=seed, domain=domain)
    directory = Path(os.fspath(directory))
    paths, files, start = {}, [], 0
    for split in SPLITS:
        end = start + sizes[split]
        paths[split] = tuple(directory / f"{split}.{language}" for language in LANGUAGES)
        files.append((paths[split][0], english[start:end]))
        files.append((paths[split][1], german[start:end]))
        start = end
    write_lines_atomic(files)
    return paths
