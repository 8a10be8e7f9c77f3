"""Word lists of the synthetic English-German task, with the grammar facts it needs."""

import typing

PERSON, ANIMAL, OBJECT, FOOD, PLACE = "person", "animal", "object", "food", "place"


class _Noun(typing.NamedTuple):
    english: str  # singular
    english_plural: str
    german: str  # nominative singular
    german_plural: str  # nominative plural
    gender: str  # "m", "f" or "n"
    category: str

    @property
    def german_dative_plural(self):
        # Dative plural adds -n unless the plural already ends in -n or -s.
        plural = self.german_plural
        return plural if plural.endswith(("n", "s")) else plural + "n"


class _Adjective(typing.NamedTuple):
    english: str
    german_stem: str  # before endings: "teuer" inflects as "teur-e"


class _Verb(typing.NamedTuple):
    english: str  # base form; a phrasal particle follows a space ("pick up")
    english_third: str
    english_participle: str
    german_first: str  # ich ...
    german_third: str  # er/sie/es ...
    german_plural: str  # wir/sie ...
    german_participle: str
    particle: str  # separable prefix ("an" in anrufen) or ""
    objects: tuple[str, ...]  # categories the object may have
    animal_subject: bool  # whether an animal may be the subject


def _nouns(category, rows):
    return tuple(_Noun(*row.split(), category) for row in rows)


NOUNS = (
    _nouns(PERSON, [
        "man men Mann Männer m", "woman women Frau Frauen f", "child children Kind Kinder n",
        "teacher teachers Lehrer Lehrer m", "doctor doctors Arzt Ärzte m",
        "friend friends Freund Freunde m", "girl girls Mädchen Mädchen n",
        "son sons Sohn Söhne m", "daughter daughters Tochter Töchter f",
        "baker bakers Bäcker Bäcker m", "sister sisters Schwester Schwestern f",
    ])
    + _nouns(ANIMAL, [
        "dog dogs Hund Hunde m", "cat cats Katze Katzen f", "horse horses Pferd Pferde n",
        "bird birds Vogel Vögel m", "cow cows Kuh Kühe f", "mouse mice Maus Mäuse f",
    ])
    + _nouns(OBJECT, [
        "car cars Auto Autos n", "ball balls Ball Bälle m", "book books Buch Bücher n",
        "table tables Tisch Tische m", "chair chairs Stuhl Stühle m", "door doors Tür Türen f",
        "window windows Fenster Fenster n", "bicycle bicycles Fahrrad Fahrräder n",
        "key keys Schlüssel Schlüssel m", "lamp lamps Lampe Lampen f",
        "bag bags Tasche Taschen f", "letter letters Brief Briefe m",
        "cup cups Tasse Tassen f", "clock clocks Uhr Uhren f", "tree trees Baum Bäume m",
        "bottle bottles Flasche Flaschen f",
    ])
    + _nouns(FOOD, [
        "apple apples Apfel Äpfel m", "cake cakes Kuchen Kuchen m", "egg eggs Ei Eier n",
        "banana bananas Banane Bananen f", "juice juices Saft Säfte m",
        "soup soups Suppe Suppen f", "cookie cookies Keks Kekse m",
    ])
    + _nouns(PLACE, [
        "house houses Haus Häuser n", "kitchen kitchens Küche Küchen f",
        "garden gardens Garten Gärten m", "school schools Schule Schulen f",
        "city cities Stadt Städte f", "park parks Park Parks m", "shop shops Laden Läden m",
        "room rooms Zimmer Zimmer n", "station stations Bahnhof Bahnhöfe m",
    ])
)  # fmt: skip
NOUNS_BY_ENGLISH = {noun.english: noun for noun in NOUNS}

# English modifier -> (German first part with its linking element, heads it combines with).
# The compound takes gender and plural from its head: "die Küchentür", "der Küchentisch".
COMPOUNDS = {
    "kitchen": ("Küchen", ("table", "chair", "door", "window", "lamp", "clock")),
    "apple": ("Apfel", ("juice", "cake", "tree")),
    "school": ("Schul", ("bag", "book", "garden")),
    "garden": ("Garten", ("door", "chair", "table", "house")),
    "car": ("Auto", ("key", "door", "window")),
    "house": ("Haus", ("door", "key", "cat")),
    "station": ("Bahnhofs", ("clock",)),
    "bicycle": ("Fahrrad", ("key", "lamp")),
    "city": ("Stadt", ("park",)),
    "banana": ("Bananen", ("cake", "juice")),
    "soup": ("Suppen", ("cup",)),
}


def compound(modifier, head):
    """The compound noun "modifier head": ("kitchen", "table") -> Küchentisch, masculine."""
    first, heads = COMPOUNDS[modifier]
    if head not in heads:
        raise ValueError(f"No compound of {modifier!r} with {head!r}. Allowed heads: {heads}")
    noun = NOUNS_BY_ENGLISH[head]
    return _Noun(
        f"{modifier} {noun.english}",
        f"{modifier} {noun.english_plural}",
        first + noun.german.lower(),
        first + noun.german_plural.lower(),
        noun.gender,
        noun.category,
    )


ADJECTIVES = tuple(
    _Adjective(*pair.split())
    for pair in (
        "small klein", "big groß", "old alt", "new neu", "red rot", "blue blau", "green grün",
        "beautiful schön", "cheap billig", "expensive teur", "young jung", "heavy schwer",
        "dirty schmutzig", "yellow gelb", "white weiß", "black schwarz",
    )
)  # fmt: skip

_ANY = (PERSON, ANIMAL, OBJECT, FOOD, PLACE)
VERBS = (
    _Verb("see", "sees", "seen", "sehe", "sieht", "sehen", "gesehen", "", _ANY, True),
    _Verb("buy", "buys", "bought", "kaufe", "kauft", "kaufen", "gekauft", "",
         (OBJECT, FOOD), False),
    _Verb("sell", "sells", "sold", "verkaufe", "verkauft", "verkaufen", "verkauft", "",
         (OBJECT, FOOD, ANIMAL), False),
    _Verb("find", "finds", "found", "finde", "findet", "finden", "gefunden", "",
         (OBJECT, ANIMAL, PERSON, FOOD), True),
    _Verb("carry", "carries", "carried", "trage", "trägt", "tragen", "getragen", "",
         (OBJECT, FOOD, ANIMAL), False),
    _Verb("wash", "washes", "washed", "wasche", "wäscht", "waschen", "gewaschen", "",
         (OBJECT, ANIMAL), False),
    _Verb("paint", "paints", "painted", "male", "malt", "malen", "gemalt", "",
         (OBJECT, PLACE, ANIMAL, PERSON), False),
    _Verb("need", "needs", "needed", "brauche", "braucht", "brauchen", "gebraucht", "",
         (OBJECT, FOOD), True),
    _Verb("repair", "repairs", "repaired", "repariere", "repariert", "reparieren", "repariert",
         "", (OBJECT,), False),
    _Verb("clean", "cleans", "cleaned", "putze", "putzt", "putzen", "geputzt", "",
         (OBJECT, PLACE), False),
    _Verb("visit", "visits", "visited", "besuche", "besucht", "besuchen", "besucht", "",
         (PERSON, PLACE), False),
    _Verb("eat", "eats", "eaten", "esse", "isst", "essen", "gegessen", "", (FOOD,), True),
    _Verb("open", "opens", "opened", "öffne", "öffnet", "öffnen", "geöffnet", "",
         (OBJECT,), False),
    _Verb("bring", "brings", "brought", "bringe", "bringt", "bringen", "gebracht", "",
         (OBJECT, FOOD), True),
    _Verb("call", "calls", "called", "rufe", "ruft", "rufen", "angerufen", "an",
         (PERSON, ANIMAL), False),
    _Verb("pick up", "picks up", "picked up", "hole", "holt", "holen", "abgeholt", "ab",
         (PERSON, OBJECT), False),
)  # fmt: skip

# (English subject, German subject, person: "1sg", "3sg" or "pl").
PRONOUNS = (
    ("I", "ich", "1sg"), ("he", "er", "3sg"), ("she", "sie", "3sg"),
    ("we", "wir", "pl"), ("they", "sie", "pl"),
)  # fmt: skip

# Verbs of saying and thinking that take a "that" clause: English 3sg/plain, German forms.
REPORTING_VERBS = (
    ("thinks", "think", "glaube", "glaubt", "glauben"),
    ("knows", "know", "weiß", "weiß", "wissen"),
    ("says", "say", "sage", "sagt", "sagen"),
    ("hopes", "hope", "hoffe", "hofft", "hoffen"),
)  # fmt: skip

# (English preposition, German preposition, German case, object categories).
PREPOSITIONS = (
    ("with", "mit", "dat", (PERSON, ANIMAL, OBJECT)),
    ("in", "in", "dat", (PLACE,)),
    ("next to", "neben", "dat", (PERSON, OBJECT, PLACE)),
    ("for", "für", "acc", (PERSON, ANIMAL)),
)
# Preposition + dative article contractions.
CONTRACTIONS = {("in", "dem"): "im", ("von", "dem"): "vom", ("zu", "dem"): "zum"}

WEEKDAYS = (
    ("Monday", "Montag"), ("Tuesday", "Dienstag"), ("Wednesday", "Mittwoch"),
    ("Thursday", "Donnerstag"), ("Friday", "Freitag"), ("Saturday", "Samstag"),
    ("Sunday", "Sonntag"),
)  # fmt: skip
MONTHS = (
    ("January", "Januar", 31), ("February", "Februar", 28), ("March", "März", 31),
    ("April", "April", 30), ("May", "Mai", 31), ("June", "Juni", 30), ("July", "Juli", 31),
    ("August", "August", 31), ("September", "September", 30), ("October", "Oktober", 31),
    ("November", "November", 30), ("December", "Dezember", 31),
)  # fmt: skip
# Adverbials that fit any tense, only the present, or only the perfect.
PRESENT_ADVERBS = (("today", "heute"), ("tomorrow", "morgen"), ("every day", "jeden Tag"))
PERFECT_ADVERBS = (("yesterday", "gestern"), ("last week", "letzte Woche"))

DEFINITE = {
    "nom": {"m": "der", "f": "die", "n": "das", "pl": "die"},
    "acc": {"m": "den", "f": "die", "n": "das", "pl": "die"},
    "dat": {"m": "dem", "f": "der", "n": "dem", "pl": "den"},
}
INDEFINITE = {
    "nom": {"m": "ein", "f": "eine", "n": "ein"},
    "acc": {"m": "einen", "f": "eine", "n": "ein"},
    "dat": {"m": "einem", "f": "einer", "n": "einem"},
}
# Adjective endings: weak after "der", mixed after "ein", strong with no article.
WEAK_ENDINGS = {
    "nom": {"m": "e", "f": "e", "n": "e", "pl": "en"},
    "acc": {"m": "en", "f": "e", "n": "e", "pl": "en"},
    "dat": {"m": "en", "f": "en", "n": "en", "pl": "en"},
}
MIXED_ENDINGS = {
    "nom": {"m": "er", "f": "e", "n": "es"},
    "acc": {"m": "en", "f": "e", "n": "es"},
    "dat": {"m": "en", "f": "en", "n": "en"},
}
STRONG_PLURAL_ENDINGS = {"nom": "e", "acc": "e", "dat": "en"}
