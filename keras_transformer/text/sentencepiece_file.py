"""Reading a SentencePiece model file that a user named, with errors in terms of that file."""


def read_sentencepiece_model(path, expected="a SentencePiece model"):
    """The serialized model in `path`, checked to load with the SentencePiece library.

    Args:
        path: str, a `.model` / `.spm` file.
        expected: str, what the file should be, for the error message
            ("the source tokenizer model of a Marian folder").

    Returns:
        bytes, the file's contents.

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not a SentencePiece model; the message names the file
            and what was expected (not the library's parser internals).

    Example:

    >>> proto = read_sentencepiece_model("opus-mt-en-de/source.spm")
    """
    import sentencepiece as spm

    with open(path, "rb") as file:
        proto = file.read()
    try:
        spm.SentencePieceProcessor(model_proto=proto)
    except RuntimeError:
        raise ValueError(f"{path}: not a SentencePiece model (expected {expected})") from None
    return proto
