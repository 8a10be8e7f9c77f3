"""The tokenizer files of a tiny Hugging Face Marian folder, made from the synthetic corpus.

`write_marian_tokenizer_files` writes what `MarianTokenizer.save_pretrained` writes: two
SentencePiece models (English source, German target) and one joint `vocab.json` over the
pieces of both, laid out as OPUS-MT's: `</s>` 0, `<unk>` 1, the pieces in an order of their
own (not either model's), a language code, `<pad>` last.
"""

import io
import json
import os
import random

import sentencepiece as spm

from keras_transformer.synthetic import generate_synthetic_pairs

PIECES_PER_SIDE = 120
LANGUAGE_CODE = ">>deu<<"


def _train(sentences, size):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=model,
        vocab_size=size,
        character_coverage=1.0,
        model_type="unigram",
        minloglevel=2,
        num_threads=1,
    )
    return model.getvalue()


def _ordinary_pieces(proto):
    processor = spm.SentencePieceProcessor(model_proto=proto)
    return [
        processor.id_to_piece(i)
        for i in range(processor.get_piece_size())
        if not (processor.is_control(i) or processor.is_unknown(i))
    ]


def write_marian_tokenizer_files(directory, seed=0):
    """Writes source.spm, target.spm, vocab.json and tokenizer_config.json into `directory`.

    Args:
        directory: str or path-like, created if missing.
        seed: int. Corpus and vocabulary order.

    Returns:
        `(english, german, vocabulary)`: the training sentences and the pieces by id.
    """
    english, german = generate_synthetic_pairs(400, seed=seed)
    source, target = _train(english, PIECES_PER_SIDE), _train(german, PIECES_PER_SIDE)
    pieces = list(dict.fromkeys(_ordinary_pieces(source) + _ordinary_pieces(target)))
    random.Random(seed).shuffle(pieces)
    vocabulary = ["</s>", "<unk>", LANGUAGE_CODE, *pieces, "<pad>"]
    os.makedirs(directory, exist_ok=True)
    for name, data in (("source.spm", source), ("target.spm", target)):
        with open(os.path.join(directory, name), "wb") as file:
            file.write(data)
    files = {
        "vocab.json": {piece: index for index, piece in enumerate(vocabulary)},
        "tokenizer_config.json": {"source_lang": "en", "target_lang": "de"},
    }
    for name, content in files.items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as file:
            json.dump(content, file, ensure_ascii=False, indent=2)
    return english, german, vocabulary


# Text MarianTokenizer treats specially: special pieces inside text, language codes (known or
# not, opening the text or not), characters neither model knows, blank text.
EDGE_CASES = [
    "A dog </s> runs",
    "a <unk> b",
    "a<pad>b",
    "",
    "   ",
    "Zwei Hunde ✓ — Ünïcödé 🙂",
    f"{LANGUAGE_CODE} The dog sleeps.",
    ">>fra<<The dog",
    f"The {LANGUAGE_CODE} dog",
    f"</s>{LANGUAGE_CODE} a",
]
