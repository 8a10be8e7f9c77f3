"""The package's names load on first use and behave as an eager `__init__`'s would."""

import os
import subprocess
import sys
import textwrap

from conftest import BACKEND_INDEPENDENT

from keras_transformer import __version__

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code):
    """Runs `code` in a fresh interpreter (imports start from nothing); returns its stdout."""
    env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@BACKEND_INDEPENDENT
def test_importing_the_packages_loads_no_backend_and_names_load_when_used():
    output = run_python(
        """
        import sys
        import keras_transformer
        from keras_transformer import checkpoints, data, decoding, evaluation, experiment
        from keras_transformer import export, figures, layers, models, text, training
        from keras_transformer.models import TransformerConfig  # a config loads no backend
        backends = ("tensorflow", "keras", "jax", "torch")
        print(sorted(name for name in backends if name in sys.modules))
        print(keras_transformer.__version__)
        try:
            keras_transformer.no_such_name
        except AttributeError as error:
            print(error)
        """
    )
    loaded, version, missing = output.splitlines()
    assert loaded == "[]"
    assert version == __version__
    assert missing == "module 'keras_transformer' has no attribute 'no_such_name'"


@BACKEND_INDEPENDENT
def test_a_function_named_as_its_module_stays_the_function():
    # Importing `models/build_model.py` binds the module to the package's `build_model`; an
    # eager `from .build_model import build_model` left the function there, and so must this.
    output = run_python(
        """
        import types
        import keras_transformer
        from keras_transformer.models.build_model import build_model as direct
        from keras_transformer.models import build_model
        import keras_transformer.layers
        print(build_model is direct, isinstance(build_model, types.ModuleType))
        print(keras_transformer.layers.masks.__name__)  # a submodule that is not exported
        print(keras_transformer.Seq2SeqTransformer.__module__)
        from keras_transformer.training import *  # noqa: F403
        print(sorted(name for name in dir() if name[0].isupper()))
        """
    )
    same, submodule, model, star = output.splitlines()
    assert same == "True False"
    assert submodule == "keras_transformer.layers.masks"
    assert model == "keras_transformer.models.seq2seq_transformer"
    assert star == str(["FusedAdam", "LabelSmoothedCrossEntropy", "TrainingMonitor",
                        "TransformerSchedule"])  # fmt: skip


@BACKEND_INDEPENDENT
def test_scoring_imports_sacremoses_only_for_the_tokenized_metrics():
    # Importing sacremoses compiles its patterns (about half a second): a run or a command
    # that scores only BLEU and chrF does not pay for it.
    output = run_python(
        """
        import sys
        from keras_transformer.evaluation.files import score_files
        from keras_transformer.evaluation.tokenized_bleu import moses_tokenize
        print("sacremoses" in sys.modules)
        print(moses_tokenize(["Hallo, Welt!"], "de")[0])
        print("sacremoses" in sys.modules)
        """
    )
    assert output.splitlines() == ["False", "Hallo , Welt !", "True"]
