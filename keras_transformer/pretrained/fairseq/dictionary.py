"""fairseq's `dict.LANG.txt`: the symbols of a fairseq model, in id order."""

import os

# fairseq's `Dictionary()` adds these first, in this order: ids 0, 1, 2, 3.
SPECIAL_SYMBOLS = ("<s>", "<pad>", "</s>", "<unk>")
BOS_ID, PAD_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
OVERWRITE_FLAG = "#fairseq:overwrite"
# fairseq's `Dictionary.pad_to_multiple_`: the multiple its training pads a dictionary to
# (`--padding-factor`, default 8), and the names of the symbols it adds.
PADDING_FACTOR = 8
FILLER = "madeupword{:04d}"


def read_fairseq_dictionary(path):
    """The symbols of a fairseq dictionary file, index = token id.

    Each line is `SYMBOL COUNT`, optionally followed by `#fairseq:overwrite`
    (fairseq's `Dictionary.add_from_file`); the symbol is everything before
    the last space (it may itself hold spaces). The four special symbols come
    first, so the file's first line is id 4. A symbol given twice is an error
    unless its second line carries the overwrite flag: then fairseq appends
    it again and the later id is the one tokens map to (`symbol_ids` does the
    same).

    Args:
        path: str or path-like, a `dict.*.txt` file.

    Returns:
        list of str: `<s>`, `<pad>`, `</s>`, `<unk>`, then the file's symbols.

    Raises:
        OSError: the file cannot be read.
        ValueError: a malformed line, a duplicate symbol or invalid UTF-8;
            the message names the file and line.

    Example:

    >>> read_fairseq_dictionary("wmt16.en-de/dict.en.txt")[:6]
    ['<s>', '<pad>', '</s>', '<unk>', ',', '.']
    """
    path = os.fspath(path)
    symbols = list(SPECIAL_SYMBOLS)
    seen = set(symbols)
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text ({error.reason})") from None
    for number, line in enumerate(lines, start=1):
        fields = line.rstrip().rsplit(" ", 1)
        overwrite = len(fields) == 2 and fields[1] == OVERWRITE_FLAG
        if overwrite:
            fields = fields[0].rsplit(" ", 1)
        if len(fields) != 2 or not fields[0] or not _is_count(fields[1]):
            raise ValueError(
                f"{path}:{number}: expected 'SYMBOL COUNT [{OVERWRITE_FLAG}]'. Received: {line!r}"
            )
        symbol = fields[0]
        if symbol in seen and not overwrite:
            raise ValueError(
                f"{path}:{number}: symbol {symbol!r} appears twice (fairseq allows it only with "
                f"{OVERWRITE_FLAG})"
            )
        seen.add(symbol)
        symbols.append(symbol)
    return symbols


def _is_count(text):
    try:
        int(text)
    except ValueError:
        return False
    return True


def symbol_ids(symbols):
    """symbol -> id; a symbol listed twice maps to its later id, as in fairseq."""
    return {symbol: index for index, symbol in enumerate(symbols)}


def padded_symbols(symbols, rows):
    """`symbols` extended to `rows` entries with fairseq's `madeupwordNNNN` fillers.

    fairseq pads a dictionary to a multiple of 8 symbols when it builds one
    (`Dictionary.pad_to_multiple_`: fillers `madeupword0000`, `madeupword0001`,
    ..., a name the dictionary already holds skipped), so an embedding matrix
    can have more rows than a dictionary file saved before that padding. Only
    that padding is accepted: `rows` must be the dictionary's size rounded up
    to a multiple of 8, and a dictionary that already holds fairseq's fillers
    (padded when saved) must match the matrix exactly. Anything else means
    the dictionary is not the model's, and its words would be misnumbered.
    The fillers are never produced by tokenizing text.

    Args:
        symbols: list of str, a dictionary's symbols (`read_fairseq_dictionary`).
        rows: int, the rows of the embedding matrix the dictionary numbers.

    Returns:
        list of str, `rows` symbols: `symbols`, then the fillers.

    Raises:
        ValueError: `rows` is not `symbols` padded as fairseq pads; the
            message gives both counts.

    Example:

    >>> padded_symbols(["<s>", "<pad>", "</s>", "<unk>", "the", ","], 8)[-2:]
    ['madeupword0000', 'madeupword0001']
    """
    if rows == len(symbols):
        return list(symbols)
    padded_size = -(-len(symbols) // PADDING_FACTOR) * PADDING_FACTOR
    already_padded = FILLER.format(0) in symbols
    if rows != padded_size or already_padded:
        rule = (
            "it already ends with fairseq's padding, so the counts must agree"
            if already_padded
            else f"fairseq pads a dictionary only up to the next multiple of {PADDING_FACTOR}, "
            f"{padded_size}"
        )
        raise ValueError(
            f"the dictionary has {len(symbols)} symbols (the four specials included) and the "
            f"embedding matrix {rows} rows; {rule}: the dictionary is not the model's"
        )
    taken, padded, index = set(symbols), list(symbols), 0
    while len(padded) < rows:
        filler = FILLER.format(index)
        if filler not in taken:
            padded.append(filler)
        index += 1
    return padded
