"""The settings a user can see: the API reference's field tables, --print-config, `recipes`.

Also the top-level --help's line per command, `evaluate`'s line naming its tokenization
language, and `from_architecture` with its deprecated alias `from_preset`.
"""

import dataclasses
import html
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest
from conftest import BACKEND_INDEPENDENT

from keras_transformer import cli
from keras_transformer.commands import evaluate, train
from keras_transformer.experiment import ExperimentConfig
from keras_transformer.experiment.recipe_main import build_parser
from keras_transformer.experiment.recipes import load_recipe, recipe_names
from keras_transformer.models import PRESETS, Seq2SeqTransformer, TransformerConfig
from keras_transformer.utils.config_reference import config_fields

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "keras_transformer")

pytestmark = BACKEND_INDEPENDENT


def api_reference():
    """The API page's generated reference, as the docs hook makes it."""
    spec = importlib.util.spec_from_file_location(
        "api_reference", os.path.join(ROOT, "docs", "hooks", "api_reference.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reference(PACKAGE)


def tables(reference):
    """{class name: {field: (type, default, description)}} of the reference's field tables,
    read from the HTML that Markdown makes of them, as the site shows them."""
    markdown = pytest.importorskip("markdown")
    page = markdown.markdown(reference, extensions=["tables"])
    found = {}
    for name, body in re.findall(
        r"Fields of <code>(\w+)</code>:</strong></p>\s*<table>(.*?)</table>", page, re.S
    ):
        rows = [
            [
                html.unescape(re.sub(r"</?code>", "", cell))
                for cell in re.findall(r"<td>(.*?)</td>", row)
            ]
            for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)[1:]
        ]
        found[name] = {row[0]: tuple(row[1:]) for row in rows}
    return found


def exported_configs():
    """The config dataclasses the subpackages export, found from their lazy export maps."""
    configs = {}
    for package in ("models", "data", "decoding", "experiment"):
        module = importlib.import_module(f"keras_transformer.{package}")
        for name, submodule in module._lazy_exports.items():
            if submodule and submodule.endswith(("_config", "_settings")) and name[0].isupper():
                cls = getattr(module, name)
                if dataclasses.is_dataclass(cls):
                    configs[name] = cls
    return configs


def test_every_config_field_is_in_the_reference_with_type_default_and_help():
    found = tables(api_reference())
    configs = exported_configs()
    assert {"TransformerConfig", "ExperimentConfig", "DecodingConfig", "PipelineConfig"} <= set(
        configs
    )
    for name, cls in configs.items():
        assert name in found, f"{name} has no field table"
        fields = dataclasses.fields(cls)
        assert list(found[name]) == [field.name for field in fields], name
        for field in fields:
            _, default, description = found[name][field.name]
            assert description, f"{name}.{field.name} has no help"
            if "help" in field.metadata:
                assert description == " ".join(field.metadata["help"].split()).replace("`", "")
            if field.default is not dataclasses.MISSING:
                assert default == repr(field.default), f"{name}.{field.name}"
    transformer = found["TransformerConfig"]
    assert len(transformer) == len(dataclasses.fields(TransformerConfig)) == 27
    assert transformer["key_dim"][:2] == ("int | None", "None")
    assert transformer["vocabulary_size"][1] == "(required)"
    assert transformer["num_layers"][:2] == ("int", "6")
    assert found["Preset"]["warmup_steps"][:2] == ("int", "4000")


def test_the_reference_and_the_flags_share_their_help_text():
    parser, added = build_parser(load_recipe("quickstart"), "")
    helps = {action.dest: action.help for action in parser._actions}
    for dest, field in added.items():
        assert helps[dest].replace("%%", "%").startswith(field.metadata["help"]), dest
    rows = {name: description for name, _, _, description in config_fields(ExperimentConfig)}
    assert rows["export"] == added["export"].metadata["help"]


def print_config(capsys, *argv):
    with pytest.raises(SystemExit) as exit_info:
        train.main([*argv, "--print-config"])
    output = capsys.readouterr()
    assert exit_info.value.code == 0 and output.err == ""
    return output.out


@pytest.mark.parametrize("recipe", ["multi30k", "table3"])
def test_print_config_writes_what_config_takes(recipe, capsys, tmp_path):
    flags = ["--max-steps", "1234", "--model-override", "num_layers=2", "--beam-size", "5"]
    printed = print_config(capsys, "--recipe", recipe, *flags)
    settings = json.loads(printed)
    expected = load_recipe(recipe).replace(
        optimization={"train_steps": 1234},
        model={"model_overrides": {**load_recipe(recipe).model.model_overrides, "num_layers": 2}},
        decoding={"beam_size": 5},
    )
    assert ExperimentConfig.from_dict(settings) == expected
    path = tmp_path / "settings.json"
    path.write_text(printed, encoding="utf-8")
    assert print_config(capsys, "--config", str(path)) == printed  # the round trip
    again = print_config(capsys, "--config", str(path), "--max-steps", "99")
    assert ExperimentConfig.from_dict(json.loads(again)) == expected.replace(
        optimization={"train_steps": 99}
    )


def test_recipes_lists_every_recipe_and_preset_without_a_backend(tmp_path):
    code = (
        "import sys\n"
        "from keras_transformer.cli import main\n"
        "code = main(['recipes'])\n"
        "loaded = [n for n in ('keras', 'tensorflow', 'jax', 'torch') if n in sys.modules]\n"
        "print('loaded:', loaded, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, "PYTHONPATH": ROOT}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0 and result.stderr == "loaded: []\n", result.stderr
    lines = result.stdout.splitlines()
    for name in [*recipe_names(), *PRESETS]:
        matching = [line for line in lines if line.split()[:1] == [name]]
        assert len(matching) == 1, name
        assert len(matching[0].split()) > 1, f"{name} has no description"
    assert "  base " in result.stdout and PRESETS["big"].description in result.stdout


def test_top_level_help_has_one_line_per_command(capsys):
    assert cli.main(["--help"]) == 0
    help_lines = capsys.readouterr().out.splitlines()
    for command in cli.HANDLERS:
        line = next(line for line in help_lines if line.split()[:1] == [command])
        assert line.split(maxsplit=1)[1] == cli.COMMANDS[command], command
    assert set(cli.COMMANDS) == set(cli.HANDLERS)


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def test_evaluate_names_the_tokenization_language_it_used(tmp_path, capsys):
    lines = ["L'homme mange une pomme.", "Deux chiens courent."]
    hypotheses = write_lines(tmp_path / "test.hyp", lines)
    cases = [
        (tmp_path / "test.fr", [], "fr rules (the suffix of test.fr; --language sets another)"),
        (tmp_path / "references.txt", [], "de rules (the default; --language sets another)"),
        (tmp_path / "test.de", ["--language", "en"], "en rules (--language)"),
    ]
    for references, flags, expected in cases:
        argv = ["--hypotheses", hypotheses, "--references", write_lines(references, lines)]
        assert evaluate.main([*argv, "--metrics", "bleu", "tokenized_bleu", *flags]) == 0
        err = capsys.readouterr().err
        assert (
            err == f"keras-transformer evaluate: tokenized_bleu tokenized with Moses' {expected}\n"
        )
    assert evaluate.main([*argv, "--metrics", "bleu"]) == 0  # no tokenized metric: no line
    assert capsys.readouterr().err == ""


def test_from_architecture_builds_a_preset_and_from_preset_warns():
    sizes = {"num_layers": 1, "d_model": 16, "num_heads": 2, "intermediate_dim": 32}
    model = Seq2SeqTransformer.from_architecture("table3-E", vocabulary_size=40, **sizes)
    assert model.config == PRESETS["table3-E"].config(40, **sizes)
    assert model.config.position_embedding == "learned"
    with pytest.warns(DeprecationWarning, match="from_architecture"):
        old = Seq2SeqTransformer.from_preset("table3-E", vocabulary_size=40, **sizes)
    assert old.config == model.config
