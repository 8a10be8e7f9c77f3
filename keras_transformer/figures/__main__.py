"""`python -m keras_transformer.figures`: `keras-transformer plot` (commands/plot.py)."""

import sys

from keras_transformer.commands.plot import main
from keras_transformer.utils.backend_logs import quiet_backend_logs
from keras_transformer.utils.process_exit import skip_collection_at_exit

if __name__ == "__main__":
    skip_collection_at_exit()
    quiet_backend_logs()
    sys.exit(main(prog="python -m keras_transformer.figures"))
