"""`python -m keras_transformer.checkpoints`: `keras-transformer average` (commands/average.py)."""

import sys

from keras_transformer.commands.average import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m keras_transformer.checkpoints"))
