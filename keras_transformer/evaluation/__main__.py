"""`python -m keras_transformer.evaluation`: `keras-transformer evaluate` (commands/evaluate.py)."""

import sys

from keras_transformer.commands.evaluate import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m keras_transformer.evaluation"))
