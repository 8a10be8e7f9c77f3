"""The front ends of `keras-transformer COMMAND`, one module per command.

Each module has a `main(argv=None, prog=...)` and, except `train` (whose flags are
`ExperimentConfig`'s) and `import_model` (which picks a format), an options dataclass
whose fields, made with `setting(default, help, ...)`, generate its flags
(`keras_transformer/utils/config_arguments.py`): a new flag is a new field with its help.
The decoding flags of `translate` and `export` are `DecodingConfig`'s fields.

`keras-transformer COMMAND --help` and a user's error must not load TensorFlow, JAX or
torch: a module here imports only light modules at the top and the rest inside the
functions that run once the arguments are checked (tests/test_command_startup.py).
"""
