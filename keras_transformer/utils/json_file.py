"""Reading a JSON file that must hold one object, with one-line errors."""

import json


def read_json_object(path):
    """Reads `path` as JSON and checks that it holds an object.

    Args:
        path: str or path-like.

    Returns:
        dict.

    Raises:
        ValueError: the file is not JSON, or holds something else than an
            object; the message names the file.
        OSError: the file cannot be read.

    Example:

    >>> read_json_object("runs/base/config.json")["model"]
    """
    with open(path, encoding="utf-8") as file:
        try:
            value = json.load(file)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} must hold a JSON object. Received: {type(value).__name__}")
    return value
