"""`python -m keras_transformer.figures`: `keras-transformer plot` (commands/plot.py)."""

import sys

from keras_transformer.commands.plot import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m keras_transformer.figures"))
