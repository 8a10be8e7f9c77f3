"""Refusing an output path that is one of a command's inputs."""

import os


def same_file(first, second):
    """Whether two paths name the same file: after symlinks, or as hard links.

    Args:
        first: str or path-like.
        second: str or path-like.

    Returns:
        bool. A path that does not exist yet is the same as another only if
        both resolve to the same absolute path.

    Example:

    >>> same_file("run/model.keras", "run/../run/model.keras")
    True
    """
    if os.path.realpath(first) == os.path.realpath(second):
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (yet)
        return False


def check_output_is_not_an_input(output, inputs, output_flag="--output"):
    """Raises `ValueError` if `output` is any of `inputs`, so writing it would destroy one.

    Args:
        output: str or path-like, the path a command will write.
        inputs: iterable of `(flag, path)`: what the command reads and the
            flag that named it, for the message. `None` paths are skipped.
        output_flag: str. The flag that named `output`.

    Raises:
        ValueError: one line naming both flags and the path.

    Example:

    >>> check_output_is_not_an_input("x.txt", [("--input", "x.txt")])
    ValueError: --output x.txt is the same file as --input x.txt: it would be overwritten ...
    """
    for flag, path in inputs:
        if path is not None and path != "-" and same_file(output, path):
            raise ValueError(
                f"{output_flag} {os.fspath(output)} is the same file as {flag} "
                f"{os.fspath(path)}: it would be overwritten while it is read; write elsewhere"
            )


def check_output_writable(output, output_flag="--output"):
    """Raises `PermissionError` if the folder `output` would be written in is not writable.

    Outputs are written to a temporary file beside them, then renamed, so the
    folder must be writable even to replace an existing file. A folder still to
    be made is judged by the nearest one that exists.

    Args:
        output: str or path-like, the file or directory a command will write.
        output_flag: str. The flag that named `output`, for the message.

    Raises:
        PermissionError: one line naming the flag, the path and the folder.

    Example:

    >>> check_output_writable("/read-only/out.txt")
    PermissionError: --output /read-only/out.txt: cannot write in its folder /read-only ...
    """
    folder = os.path.dirname(os.path.abspath(output))
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    if os.path.isdir(folder) and not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(
            f"{output_flag} {os.fspath(output)}: cannot write in its folder {folder} "
            "(permission denied); choose a writable location"
        )


def is_inside(path, directory):
    """Whether `path` lies inside `directory` (after symlinks), or is it.

    Example:

    >>> is_inside("out/vocabulary.model", "out")
    True
    """
    directory = os.path.realpath(directory)
    path = os.path.realpath(path)
    return path == directory or path.startswith(os.path.join(directory, ""))


def check_inputs_outside_output_dir(output_dir, inputs, output_flag="--output"):
    """Raises `ValueError` if one of `inputs` lies inside `output_dir`, which is to be replaced.

    A command that replaces a whole directory (`export --overwrite`) would
    delete such an input before it reads it, or while.

    Args:
        output_dir: str or path-like, the directory the command replaces.
        inputs: iterable of `(flag, path)`; `None` and "-" paths are skipped.
        output_flag: str. The flag that named `output_dir`.

    Raises:
        ValueError: one line naming both flags and paths.

    Example:

    >>> check_inputs_outside_output_dir("out", [("--tokenizer", "out/spm.model")])
    ValueError: --output out holds --tokenizer out/spm.model, which replacing it would delete ...
    """
    for flag, path in inputs:
        if path is not None and path != "-" and is_inside(path, output_dir):
            raise ValueError(
                f"{output_flag} {os.fspath(output_dir)} holds {flag} {os.fspath(path)}, which "
                "replacing it would delete; write elsewhere, or move the input out first"
            )
