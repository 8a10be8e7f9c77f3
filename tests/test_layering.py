"""The package's layering, read from its source with `ast`.

- Private names of TensorFlow, Keras, torch, JAX, tensorflow-text and keras-hub
  (a `_name` attribute of theirs, a `keras.src`, `tensorflow.python`,
  `tensorflow_text.python` or `keras_hub.src` import) are read in `compat.py` only,
  and the `backend/` package (which asks compat) and `compat.py` alone look at the
  backend or the device; everything else calls a named function of theirs
  (`backend.is_tensorflow()`, `backend.fast_forms()`, ...).
- A lower folder never imports a higher one, and `export` (serving) never
  imports `training`, even in a function.
"""

import ast
import functools
import os
import pathlib
import subprocess
import sys
import textwrap

from conftest import BACKEND_INDEPENDENT

import keras_transformer

PACKAGE = pathlib.Path(keras_transformer.__file__).parent
ROOT = PACKAGE.parent
LIBRARIES = {"tensorflow", "keras", "torch", "jax", "jaxlib", "tensorflow_text", "keras_hub"}
# Private module paths of the libraries (public API re-exports them under other names).
PRIVATE_MODULES = (
    "keras.src",
    "tensorflow.python",
    "jax._src",
    "torch._",
    "tensorflow_text.python",
    "keras_hub.src",
)
# Calls that ask for the backend or the device.
BACKEND_CALLS = {
    "backend",  # keras.backend.backend(), keras.config.backend()
    "default_backend",  # jax.default_backend()
    "is_available",  # torch.cuda.is_available(), torch.backends.mps.is_available()
    "get_visible_devices",
    "list_physical_devices",
    "list_logical_devices",
}
# Private attributes of the package's own objects set outside a class (the names a
# `self._x = ...` or a `def _x` defines are found by `own_private_names`).
OWN_ATTRIBUTES = {"_lazy_exports": "utils/lazy_exports.py marks a lazily loaded package"}
# Private methods of a library's class that a subclass of the package overrides (a hook
# called by the library itself, which no function in compat.py can stand in for).
OVERRIDDEN_HOOKS = {
    "text/subword_tokenizer.py": {"_set_proto_tf"},  # keras-hub makes its op tokenizer there
}
# Lower to higher: a folder imports only folders before it. `utils` and the top-level
# modules that import nothing of the package's come first; the commands and the tools
# built on everything come last, in any order among themselves.
ORDER = [
    ["utils", "version"],
    ["compat"],
    ["backend"],
    ["text"],
    ["synthetic"],
    ["data"],
    ["layers"],
    ["models"],
    ["training"],
    ["checkpoints"],
    ["decoding"],
    ["evaluation"],
    ["export"],
    ["experiment"],
    ["pretrained", "figures", "commands", "cli", "__main__"],
]


def looks_at_backend(name):
    """Whether module `name` (relative to the package) may look at the backend and device."""
    return name == "compat.py" or name.startswith("backend/")


RANK = {name: rank for rank, names in enumerate(ORDER) for name in names}


@functools.cache
def parsed_sources():
    return tuple(
        (path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(PACKAGE.rglob("*.py"))
    )


def sources():
    """`(path relative to the package, ast)` of every module of the package."""
    return parsed_sources()


def is_private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def imported_modules(node):
    """The absolute module names an import statement reads (each `from` name as a module too)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return []


def library_names(tree):
    """Local names bound to a TensorFlow, Keras, torch or JAX module (`tf`, `ops`, `jnp`)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in LIBRARIES:
                    names.add(alias.asname or alias.name.split(".")[0])
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] in LIBRARIES
        ):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def attribute_chain(node):
    """`a.b.c` as `("a", ["b", "c"])`; the root is None unless it is a plain name."""
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.insert(0, node.attr)
        node = node.value
    return (node.id if isinstance(node, ast.Name) else None), attributes


def own_private_names():
    """Private names the package defines: functions, classes, and attributes of `self`/`cls`."""
    names = set(OWN_ATTRIBUTES)
    for _, tree in sources():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                names.add(node.attr)
    return {name for name in names if is_private(name)}


@functools.cache
def function_names():
    """{module path: the names of the functions and methods it defines}, the backend modules
    left out; walked once, not once per module that asks."""
    return {
        name: {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        for name, tree in sources()
        if not looks_at_backend(name)
    }


def overridden_only(tree):
    """Private methods a class of this module defines that `super()` reaches past it."""
    found = {}
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for method in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            for node in ast.walk(method):
                if (
                    isinstance(node, ast.Attribute)
                    and is_private(node.attr)
                    and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Name)
                    and node.value.func.id == "super"
                ):
                    found[node] = node.attr
    return found


def private_names_read(name, tree, own):
    """`(line, text)` of each private library name `tree` reads."""
    libraries = library_names(tree)
    defined_elsewhere = set().union(
        *(names for other, names in function_names().items() if other != name)
    )
    supers = overridden_only(tree)
    allowed = OVERRIDDEN_HOOKS.get(name, set())
    found = []
    for node in ast.walk(tree):
        for module in imported_modules(node):
            parts = module.split(".")
            if parts[0] in LIBRARIES and (
                module.startswith(PRIVATE_MODULES) or any(is_private(p) for p in parts)
            ):
                found.append((node.lineno, ast.unparse(node)))
                break
        if isinstance(node, ast.Attribute) and is_private(node.attr) and node.attr not in allowed:
            root, _ = attribute_chain(node)
            if root in libraries:
                found.append((node.lineno, ast.unparse(node)))
            elif node in supers and node.attr not in defined_elsewhere:
                # `super()._x` where no other class of the package defines `_x`: a library's.
                found.append((node.lineno, ast.unparse(node)))
            elif root not in ("self", "cls") and node not in supers and node.attr not in own:
                found.append((node.lineno, ast.unparse(node)))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and is_private(node.args[1].value)
            and node.args[1].value not in own
        ):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def backend_checks(tree):
    """`(line, text)` of each call that asks for the backend or the device."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            root, chain = attribute_chain(node.func)
            if chain[-1] in BACKEND_CALLS and (root is not None or len(chain) > 1):
                if chain[-1] == "backend" and chain[:-1][-1:] not in (["backend"], ["config"]):
                    continue  # e.g. `keras_transformer.backend` itself is not called
                found.append((node.lineno, ast.unparse(node)))
        # Reading KERAS_BACKEND (setting it for a subprocess is no check).
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.slice, ast.Constant)
            and node.slice.value == "KERAS_BACKEND"
        ):
            found.append((node.lineno, ast.unparse(node)))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "KERAS_BACKEND"
        ):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


@BACKEND_INDEPENDENT
def test_private_library_names_and_backend_checks_are_in_backend_and_compat_only():
    own = own_private_names()
    found = []
    for name, tree in sources():
        if name != "compat.py":
            for line, text in private_names_read(name, tree, own):
                found.append(f"keras_transformer/{name}:{line}: private name: {text}")
        if looks_at_backend(name):
            continue
        for line, text in backend_checks(tree):
            found.append(f"keras_transformer/{name}:{line}: backend check: {text}")
    assert not found, (
        "Move these into keras_transformer/compat.py (private names) or call a function of "
        "keras_transformer/backend/ (backend checks):\n" + "\n".join(found)
    )
    for name in OVERRIDDEN_HOOKS:
        assert (PACKAGE / name).exists(), f"stale entry {name}"


@BACKEND_INDEPENDENT
def test_the_scan_finds_what_it_looks_for():
    # The checks above can fail: each kind of name they look for, in a made-up module.
    tree = ast.parse(
        textwrap.dedent(
            """
            import keras
            import torch
            from keras.src.saving import serialization_lib
            def f(optimizer, model):
                torch._dynamo.disable(f)
                rate = optimizer._learning_rate
                strategy = getattr(model, "_distribute_strategy", None)
                if keras.backend.backend() == "jax" or torch.cuda.is_available():
                    return os.environ.get("KERAS_BACKEND")
            class Adam(keras.optimizers.Adam):
                def _backend_update_step(self, *args):
                    super()._backend_update_step(*args)
            """
        )
    )
    private = [text for _, text in private_names_read("made_up.py", tree, own_private_names())]
    assert private == [
        "from keras.src.saving import serialization_lib",
        "torch._dynamo",
        "optimizer._learning_rate",
        "getattr(model, '_distribute_strategy', None)",
        "super()._backend_update_step",
    ], private
    checks = [text for _, text in backend_checks(tree)]
    assert checks == [
        "keras.backend.backend()",
        "torch.cuda.is_available()",
        "os.environ.get('KERAS_BACKEND')",
    ], checks


def folder_of(module):
    parts = module.split(".")
    if parts[0] != "keras_transformer" or len(parts) < 2:
        return None
    return parts[1]


@BACKEND_INDEPENDENT
def test_lower_folders_never_import_higher_ones_and_export_never_imports_training():
    found = []
    for name, tree in sources():
        # Every module is on its folder's floor, a folder's `__main__.py` too; the package's
        # own `__main__.py` (`python -m keras_transformer`) is at the top.
        here = name.split("/")[0].removesuffix(".py")
        if here == "__init__":
            continue  # the package's lazy names; `test_lazy_exports.py` checks they stay lazy
        assert here in RANK, f"keras_transformer/{name}: add its folder to ORDER"
        for node in ast.walk(tree):
            modules = imported_modules(node)
            if isinstance(node, ast.ImportFrom) and node.module == "keras_transformer":
                modules = [f"keras_transformer.{alias.name}" for alias in node.names]
            for module in modules:
                there = folder_of(module)
                if there is None or there == here or there not in RANK:
                    continue
                if RANK[there] > RANK[here] or (here, there) == ("export", "training"):
                    found.append(f"keras_transformer/{name}:{node.lineno}: {here} imports {module}")
    assert not found, "\n".join(found)


@BACKEND_INDEPENDENT
def test_importing_export_loads_no_training_code():
    # Every module of the export package, in a fresh interpreter.
    modules = sorted(
        f"keras_transformer.export.{path.stem}"
        for path in (PACKAGE / "export").glob("*.py")
        if path.stem not in ("__init__", "__main__")
    )
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + textwrap.dedent(
            """
        loaded = sorted(name for name in sys.modules if name.startswith("keras_transformer."))
        print(" ".join(loaded))
        """
        )
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = result.stdout.split()
    assert "keras_transformer.export.export_saved_model" in loaded  # the imports ran
    assert not [name for name in loaded if name.startswith("keras_transformer.training")], loaded
