"""Argument parsing shared by the package's commands."""

import argparse


class OneLineErrorParser(argparse.ArgumentParser):
    """Reports a bad invocation in one line (argparse prints the usage first), exit code 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")
