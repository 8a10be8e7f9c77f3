"""A SavedModel export run in a TensorFlow-backend process, from any backend.

The serving graph is a TensorFlow graph, so under JAX or torch the export
happens in a subprocess with `KERAS_BACKEND=tensorflow`: a model trained on
another backend gets there through its backend-independent files. The
subprocess reads what to export from a JSON spec (`TensorFlowExport`):

    python -m keras_transformer.export.tensorflow_export SPEC.json
"""

import dataclasses
import json
import os
import subprocess
import sys
import tempfile

from keras_transformer.utils.json_file import read_json_object

# The module the subprocess runs: this one.
MODULE = "keras_transformer.export.tensorflow_export"
SPEC_FORMAT = 1
# Exit status of an export the spec's files or settings made fail (the commands' user error).
USER_ERROR_STATUS = 2


@dataclasses.dataclass(frozen=True)
class TensorFlowExport:
    """What a TensorFlow-backend process exports, as data: files in, a SavedModel out.

    The model comes from `model` (a `.keras` file), or from `weights` with
    `config` or `preset`; `tokenizer` is a SentencePiece `.model` file, needed
    unless `model` holds its tokenizer (`load_model_files`). `decoding` holds
    `DecodingConfig` fields by name, as `DecodingConfig.to_dict` gives them.

    Args:
        output: str, the SavedModel directory to create.
        decoding: dict, the served `DecodingConfig` fields.
        model: str or None, a `.keras` file.
        weights: str or None, a `.weights.h5` file.
        config: str or None, a JSON file of the model's settings (with `weights`).
        preset: str or None, a model preset (with `weights`).
        tokenizer: str or None, a SentencePiece `.model` file.
        adapter: str or None, a LoRA adapter file of the model, merged in
            memory before the export.
        overwrite: bool, replace an existing `output`.
        prog: str, the name an error line starts with (`PROG: error: ...`).

    Example:

    >>> export = TensorFlowExport("serving/1", {"beam_size": 4}, model="run/model.keras")
    >>> export.run().returncode
    0
    """

    output: str
    decoding: dict = dataclasses.field(default_factory=dict)
    model: str | None = None
    weights: str | None = None
    config: str | None = None
    preset: str | None = None
    tokenizer: str | None = None
    adapter: str | None = None
    overwrite: bool = False
    prog: str = f"python -m {MODULE}"

    def to_dict(self):
        return {"format": SPEC_FORMAT, **dataclasses.asdict(self)}

    @classmethod
    def from_file(cls, path):
        """The spec written by `run`: a JSON object of this class' fields."""
        spec = read_json_object(path)
        if spec.pop("format", None) != SPEC_FORMAT:
            raise ValueError(f"{path}: not a TensorFlowExport spec of format {SPEC_FORMAT}")
        return cls(**spec)

    def run(self, capture_stderr=False):
        """Exports in a `KERAS_BACKEND=tensorflow` subprocess; returns its `CompletedProcess`.

        Args:
            capture_stderr: bool. Capture the standard error as text (in the
                result's `stderr`) instead of passing it through.
        """
        environment = {**os.environ, "KERAS_BACKEND": "tensorflow"}
        with tempfile.TemporaryDirectory() as directory:
            spec_path = os.path.join(directory, "export.json")
            with open(spec_path, "w", encoding="utf-8") as file:
                json.dump(self.to_dict(), file, indent=2)
            return subprocess.run(
                [sys.executable, "-m", MODULE, spec_path],
                env=environment,
                stderr=subprocess.PIPE if capture_stderr else None,
                text=True,
                check=False,
            )

    def export(self):
        """Loads the model and writes the SavedModel in this process (TensorFlow backend).

        Returns:
            str, the absolute path of the SavedModel directory.
        """
        from keras_transformer.decoding.decoding_config import DecodingConfig
        from keras_transformer.export.export_saved_model import export_saved_model
        from keras_transformer.export.model_files import load_model_files

        model, tokenizer = load_model_files(
            self.model,
            weights=self.weights,
            config=self.config,
            preset=self.preset,
            tokenizer=self.tokenizer,
            adapter=self.adapter,
        )
        decoding = DecodingConfig.from_dict(self.decoding)
        return export_saved_model(model, tokenizer, self.output, decoding, overwrite=self.overwrite)


def main(argv=None):
    """`python -m keras_transformer.export.tensorflow_export SPEC.json`: runs the spec's export.

    Returns:
        int: 0 once the SavedModel is written; 2 with one line on stderr for
        an error of the spec's files or settings.
    """
    from keras_transformer.utils.command_line import one_line

    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) != 1:
        print(f"usage: python -m {MODULE} SPEC.json", file=sys.stderr)
        return USER_ERROR_STATUS
    spec = TensorFlowExport.from_file(argv[0])
    try:
        spec.export()
    except (OSError, ValueError, TypeError) as error:
        print(f"{spec.prog}: error: {one_line(error)}", file=sys.stderr)
        return USER_ERROR_STATUS
    return 0


if __name__ == "__main__":
    from keras_transformer.utils.backend_logs import quiet_backend_logs
    from keras_transformer.utils.process_exit import skip_collection_at_exit

    skip_collection_at_exit()
    quiet_backend_logs([])  # the parent's --verbose reaches here through the environment
    sys.exit(main())
