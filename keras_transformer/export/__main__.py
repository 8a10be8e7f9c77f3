"""`python -m keras_transformer.export`: `keras-transformer export` (commands/export.py).

`export_saved_model` runs it under `KERAS_BACKEND=tensorflow` (`run_export_command`).
"""

import sys

from keras_transformer.commands.export import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m keras_transformer.export"))
