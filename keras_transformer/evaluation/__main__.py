"""`python -m keras_transformer.evaluation`: an alias of `python -m keras_transformer evaluate`.

Kept for earlier command lines. It imports nothing of the package: it runs the package's
own entry point (`keras_transformer/__main__.py`, the top floor) with the command's name.
"""

import runpy
import sys

if __name__ == "__main__":
    sys.argv[1:1] = ["evaluate"]
    runpy.run_module("keras_transformer", run_name="__main__", alter_sys=True)
