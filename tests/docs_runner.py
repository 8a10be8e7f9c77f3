"""Runs one page's code blocks in order, in the current folder: `python docs_runner.py BLOCKS`.

BLOCKS is a JSON list of {"language", "code", "line", "page"}. Python blocks run in one
namespace (a later block sees an earlier one's names); shell blocks run in bash with
`set -euo pipefail`, and the variables a block sets are seen by the page's later shell
blocks. The first failing block ends the run with status 1 and names its page and line.
"""

import json
import os
import subprocess
import sys
import traceback

from docs_blocks import console_commands

# Each shell block starts from the variables the blocks before it left (allexport keeps the
# ones it sets) and hands its own on.
SHELL_PROLOGUE = "set -euo pipefail\nif [ -f .docs-env ]; then source .docs-env; fi\nset -a\n"
SHELL_EPILOGUE = "\nset +a\nexport -p | grep -v -E ' (PWD|OLDPWD|SHLVL|_)=' > .docs-env\n"


def run_block(block, namespace):
    where = f"{block['page']}:{block['line']}"
    print(f"--- {where} ({block['language']})", flush=True)
    if block["language"] == "python":
        try:
            exec(compile(block["code"], where, "exec"), namespace)
        except BaseException:
            traceback.print_exc()
            return False
        return True
    code = block["code"]
    if block["language"] == "console":
        code = console_commands(code)
    result = subprocess.run(["bash", "-c", SHELL_PROLOGUE + code + SHELL_EPILOGUE])
    return result.returncode == 0


def main(argv):
    with open(argv[1], encoding="utf-8") as file:
        blocks = json.load(file)
    namespace = {"__name__": "__docs__"}
    for block in blocks:
        if not run_block(block, namespace):
            print(f"FAILED: the block at {block['page']}:{block['line']}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    from keras_transformer.utils.process_exit import skip_collection_at_exit

    sys.path.insert(0, os.getcwd())
    skip_collection_at_exit()  # as the commands the pages show
    sys.exit(main(sys.argv))
