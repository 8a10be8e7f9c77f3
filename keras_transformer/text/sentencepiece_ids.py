"""The special ids of every vocabulary of this package, and their check (no backend needed)."""

import sentencepiece as spm

# Special ids every vocabulary of this package is trained with. The model's
# `TransformerConfig.pad_id` defaults to PAD_ID.
PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
SPECIAL_IDS = {"pad_id": PAD_ID, "unk_id": UNK_ID, "bos_id": BOS_ID, "eos_id": EOS_ID}


def check_special_ids(proto_bytes):
    """Raises ValueError unless `proto_bytes` is a SentencePiece model with ids 0/1/2/3.

    Args:
        proto_bytes: bytes, a serialized SentencePiece model.

    Raises:
        ValueError: not a SentencePiece model, or its pad/unk/begin/end ids
            are not `SPECIAL_IDS`.

    Example:

    >>> check_special_ids(open("vocabulary.model", "rb").read())
    """
    try:
        processor = spm.SentencePieceProcessor(model_proto=proto_bytes)
    except RuntimeError as error:
        raise ValueError(f"`proto` is not a valid SentencePiece model: {error}") from None
    received = {name: getattr(processor, name)() for name in SPECIAL_IDS}
    if received != SPECIAL_IDS:
        raise ValueError(
            "SubwordTokenizer needs a SentencePiece model trained with "
            f"{', '.join(f'{k}={v}' for k, v in SPECIAL_IDS.items())} "
            "(`train_vocabulary` sets them). "
            f"Received a model with {', '.join(f'{k}={v}' for k, v in received.items())}"
        )
