"""mkdocs hook: api.md's reference, one entry per public name of each subpackage.

Each subpackage of keras_transformer lists its public names and their modules in one
`lazy_exports(__name__, {...})` call. This hook reads those maps (statically: nothing is
imported) and replaces the `<!-- api-reference -->` line of api.md with a mkdocstrings
`:::` entry per name, so a name added, moved or removed changes the page, and a name whose
module no longer holds it fails `mkdocs build --strict`. A config dataclass's entry is followed
by a table of its fields (type, default, help), made from the field metadata the command
line's flags are made from (`keras_transformer/utils/config_reference.py`); only the config
modules are imported for it, and they load no backend.
"""

import ast
import importlib
import os
import sys

MARKER = "<!-- api-reference -->"
# The order of the reference: the data's way through the package.
PACKAGES = (
    "models", "layers", "training", "text", "synthetic", "data", "decoding", "evaluation",
    "checkpoints", "export", "experiment", "figures", "pretrained",
)  # fmt: skip


def on_page_markdown(markdown, page, config, files):
    if MARKER not in markdown:
        return markdown
    root = os.path.dirname(config["config_file_path"])
    return markdown.replace(MARKER, reference(os.path.join(root, "keras_transformer")))


def reference(package_dir):
    """The reference's markdown: a section per subpackage, an entry per public name."""
    sections = []
    for name in PACKAGES:
        path = os.path.join(package_dir, name, "__init__.py")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as file:
            tree = ast.parse(file.read())
        lines = [f"## `keras_transformer.{name}`", "", ast.get_docstring(tree) or "", ""]
        for public, module in sorted(exports(tree).items(), key=lambda item: item[0].lower()):
            if module is None or public.isupper():  # subpackages, constants
                continue
            lines += [f"::: keras_transformer.{name}.{module}.{public}", ""]
            module_file = os.path.join(package_dir, name, *module.split(".")) + ".py"
            if is_dataclass_in(module_file, public):
                lines += fields_table(f"keras_transformer.{name}.{module}", public)
        sections.append("\n".join(lines))
    return "\n".join(sections)


def exports(tree):
    """The {name: module} dict literal of the module's `lazy_exports` call."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "lazy_exports":
            return ast.literal_eval(node.args[1])
    return {}


def is_dataclass_in(path, name):
    """Whether class `name` of the module at `path` is a dataclass of settings with help.

    That is a class whose fields are made with `setting(...)` or carry `metadata` (the
    configs, `Preset`); read from the source, so that only those modules are imported.
    """
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as file:
        tree = ast.parse(file.read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return any(
                isinstance(item, ast.AnnAssign)
                and isinstance(item.value, ast.Call)
                and (
                    getattr(item.value.func, "id", "").endswith("setting")
                    or any(keyword.arg == "metadata" for keyword in item.value.keywords)
                )
                for item in node.body
            )
    return False


def fields_table(module, name):
    """The markdown lines of the fields table of dataclass `name` in `module`."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if root not in sys.path:
        sys.path.insert(0, root)
    from keras_transformer.utils.config_reference import config_table

    cls = getattr(importlib.import_module(module), name)
    return [f"**Fields of `{name}`:**", "", config_table(cls), ""]
