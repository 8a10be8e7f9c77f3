"""A package's public names loaded on first use, so that importing the package is cheap.

`import keras_transformer` (or any of its sub-packages) loads neither Keras nor a backend:
the commands parse and check their arguments first and import TensorFlow, JAX or torch
only for the work itself. `from keras_transformer.models import Seq2SeqTransformer`
still works; it imports the one module that defines the name.
"""

import importlib
import importlib.util
import sys
import types


class LazyPackage(types.ModuleType):
    """A package module whose exported names are imported when first read (PEP 562).

    Reads `_lazy_exports`, a dict from each public name to the submodule that defines
    it (None: the name is itself a submodule). A function named as its module
    (`models.build_model.build_model`) stays the package's attribute when the module is
    imported, as an eager `from .build_model import build_model` would leave it.
    """

    def __getattr__(self, name):
        exports = self.__dict__.get("_lazy_exports", {})
        package = self.__name__
        if name in exports:
            submodule = exports[name] or name
            module = importlib.import_module(f"{package}.{submodule}")
            value = module if exports[name] is None else getattr(module, name)
        elif not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}"):
            # A submodule not yet imported (`keras_transformer.layers.masks`), as an eager
            # `__init__` that imported it would have offered.
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        super().__setattr__(name, value)
        return value

    def __setattr__(self, name, value):
        exports = self.__dict__.get("_lazy_exports", {})
        if isinstance(value, types.ModuleType) and exports.get(name) == name:
            value = getattr(value, name)  # the import system binding the submodule
        super().__setattr__(name, value)

    def __dir__(self):
        return sorted(set(self.__dict__) | set(self.__dict__.get("_lazy_exports", {})))


def lazy_exports(package, exports):
    """Makes `package` load `exports` on first use; call it at the end of its `__init__`.

    Args:
        package: str, the package's `__name__`.
        exports: dict from each public name to the submodule (relative to `package`)
            that defines it; a name mapped to None is itself a submodule.

    Returns:
        list of str, the sorted names, for `__all__`.

    Example:

    >>> # keras_transformer/models/__init__.py
    >>> __all__ = lazy_exports(__name__, {"PRESETS": "presets"})  # doctest: +SKIP
    """
    module = sys.modules[package]
    module._lazy_exports = dict(exports)
    module.__class__ = LazyPackage
    return sorted(exports)
