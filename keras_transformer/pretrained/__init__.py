"""Published translation models brought into this package: Marian / OPUS-MT and fairseq.

`keras-transformer import marian|fairseq ...` writes a `save_translation_model` file that
`translate`, `evaluate`, `export` and `train --init-from` take as they take a trained model.
"""
