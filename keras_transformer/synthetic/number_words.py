"""English and German number words: cardinals, date ordinals and years.

German writes numbers below a million as one word with the units before the
tens ("einundzwanzig", 21), which is what makes them a reordering and
compounding task for a translation model.
"""

ENGLISH_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
ENGLISH_TENS = (
    "",
    "",
    "twenty",
    "thirty",
    "forty",
    "fifty",
    "sixty",
    "seventy",
    "eighty",
    "ninety",
)
ENGLISH_IRREGULAR_ORDINALS = {
    "one": "first", "two": "second", "three": "third", "five": "fifth",
    "eight": "eighth", "nine": "ninth", "twelve": "twelfth",
}  # fmt: skip

GERMAN_ONES = [
    "null",
    "eins",
    "zwei",
    "drei",
    "vier",
    "fünf",
    "sechs",
    "sieben",
    "acht",
    "neun",
    "zehn",
    "elf",
    "zwölf",
    "dreizehn",
    "vierzehn",
    "fünfzehn",
    "sechzehn",
    "siebzehn",
    "achtzehn",
    "neunzehn",
]
GERMAN_TENS = (
    "",
    "",
    "zwanzig",
    "dreißig",
    "vierzig",
    "fünfzig",
    "sechzig",
    "siebzig",
    "achtzig",
    "neunzig",
)
GERMAN_IRREGULAR_ORDINAL_STEMS = {1: "erst", 3: "dritt", 7: "siebt", 8: "acht"}

YEAR_RANGE = (1900, 2099)


def _check(n, low, high, name="n"):
    if isinstance(n, bool) or not isinstance(n, int) or not low <= n <= high:
        raise ValueError(f"`{name}` must be an int in [{low}, {high}]. Received: {name}={n!r}")


def english_cardinal(n):
    """0..999 in American English words: 345 -> "three hundred forty-five"."""
    _check(n, 0, 999)
    if n < 20:
        return ENGLISH_ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return ENGLISH_TENS[tens] + (f"-{ENGLISH_ONES[ones]}" if ones else "")
    hundreds, rest = divmod(n, 100)
    words = f"{ENGLISH_ONES[hundreds]} hundred"
    return f"{words} {english_cardinal(rest)}" if rest else words


def english_ordinal(n):
    """1..99 as an English ordinal: 21 -> "twenty-first", 12 -> "twelfth"."""
    _check(n, 1, 99)
    words = english_cardinal(n)
    head, _, last = words.rpartition("-")
    if last in ENGLISH_IRREGULAR_ORDINALS:
        last = ENGLISH_IRREGULAR_ORDINALS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return f"{head}-{last}" if head else last


def english_year(year):
    """1900..2099 as spoken: 1985 -> "nineteen eighty-five", 2007 -> "two thousand seven"."""
    _check(year, *YEAR_RANGE, name="year")
    century, rest = divmod(year, 100)
    if century == 19:
        if rest == 0:
            return "nineteen hundred"
        if rest < 10:
            return f"nineteen oh {ENGLISH_ONES[rest]}"
        return f"nineteen {english_cardinal(rest)}"
    if rest < 10:
        return "two thousand" + (f" {ENGLISH_ONES[rest]}" if rest else "")
    return f"twenty {english_cardinal(rest)}"


def german_cardinal(n):
    """1..999 as one German word: 21 -> "einundzwanzig", 101 -> "einhunderteins"."""
    _check(n, 1, 999)
    if n < 20:
        return GERMAN_ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        if not ones:
            return GERMAN_TENS[tens]
        unit = "ein" if ones == 1 else GERMAN_ONES[ones]
        return f"{unit}und{GERMAN_TENS[tens]}"
    hundreds, rest = divmod(n, 100)
    words = ("ein" if hundreds == 1 else GERMAN_ONES[hundreds]) + "hundert"
    return words + (german_cardinal(rest) if rest else "")


def german_ordinal(n, ending="en"):
    """1..99 as a German ordinal with an adjective ending: (3, "en") -> "dritten".

    The stem is the cardinal plus "t" below 20 and plus "st" from 20 on, with
    four irregular stems (erst, dritt, siebt, acht). Dates after "am" take "-en".
    """
    _check(n, 1, 99)
    if n in GERMAN_IRREGULAR_ORDINAL_STEMS:
        stem = GERMAN_IRREGULAR_ORDINAL_STEMS[n]
    else:
        stem = german_cardinal(n) + ("t" if n < 20 else "st")
    return stem + ending


def german_year(year):
    """1900..2099 as one word: 1985 -> "neunzehnhundertfünfundachtzig"."""
    _check(year, *YEAR_RANGE, name="year")
    century, rest = divmod(year, 100)
    head = "neunzehnhundert" if century == 19 else "zweitausend"
    return head + (german_cardinal(rest) if rest else "")
