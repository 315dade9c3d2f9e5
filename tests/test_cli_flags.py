"""Every verb's flags, exactly: a dump of each sub-parser (its help, groups and every action's
option strings, dest, metavar, help, choices, default, type and action) compared with
tests/cli_flags.json.

The flags are generated from one declaration per input (generic_trainer.intake.options); this pins
the CLI a user sees, so a change to the declarations that changes a flag shows here. After adding or
changing a flag on purpose, regenerate the snapshot: `python tests/test_cli_flags.py --update`.
"""

import argparse
import json
import pathlib
import sys

import pytest

SNAPSHOT = pathlib.Path(__file__).with_name("cli_flags.json")


def _name(value):
    """A flag's type: the builtin's name, or "check" for the project's own checking function."""
    if value is None or value in (int, float, str):
        return getattr(value, "__name__", None)
    return "check"


def dump_parser(parser: argparse.ArgumentParser) -> dict:
    """The parts of a parser that decide its --help and how it parses, as plain JSON."""
    groups = []
    for group in parser._action_groups:
        actions = [
            {
                "option_strings": a.option_strings,
                "dest": a.dest,
                "metavar": a.metavar,
                "help": a.help,
                "choices": list(a.choices)
                if a.choices is not None and not isinstance(a.choices, dict)
                else None,
                "default": a.default
                if a.default is None or isinstance(a.default, (str, int, float, bool))
                else repr(a.default),
                "type": _name(a.type),
                "nargs": a.nargs,
                "const": a.const,
                "required": a.required,
                "action": type(a).__name__,
            }
            for a in group._group_actions
        ]
        groups.append({"title": group.title, "description": group.description, "actions": actions})
    return {
        "prog": parser.prog,
        "description": parser.description,
        "epilog": parser.epilog,
        "order": [a.dest for a in parser._actions],
        "groups": groups,
    }


def dump_all() -> dict:
    from generic_trainer import cli

    parser = cli.build_parser()
    sub = parser._subparsers._group_actions[0]
    verbs = {name: dump_parser(p) for name, p in sub.choices.items()}
    helps = {a.dest: a.help for a in sub._choices_actions}
    return {"top": dump_parser(parser), "verb_help": helps, "verbs": verbs}


def test_every_verbs_flags_are_as_declared():
    expected = json.loads(SNAPSHOT.read_text())
    actual = json.loads(json.dumps(dump_all()))
    assert set(actual["verbs"]) == set(expected["verbs"])
    for verb in expected["verbs"]:
        assert actual["verbs"][verb] == expected["verbs"][verb], (
            f"{verb}'s flags changed (see module docstring)"
        )
    assert actual == expected


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_cli_flags.py --update  (rewrites tests/cli_flags.json)")
    SNAPSHOT.write_text(json.dumps(dump_all(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}")


# ----------------------------------------------------------------------------------------------
# The declarations: one entry makes a flag, a component input and a request field
# ----------------------------------------------------------------------------------------------


def _declarations():
    from generic_trainer import cli

    return cli.DECLARATIONS


REQUESTS = {
    "train": "intake.fit_request:TrainRequest",
    "tune": "intake.fit_request:TuneRequest",
    "evaluate": "intake.judge_request:EvaluateRequest",
    "infra-validate": "intake.judge_request:InfraValidateRequest",
    "import-examples": "intake.data_request:ImportExamplesRequest",
    "transform": "intake.transform_request:TransformRequest",
    "push": "intake.push_request:PushRequest",
    "doctor": "diagnose.request:DoctorRequest",
    "export-tflite": "intake.export_request:ExportTfliteRequest",
    "bulk-infer": "intake.infer_request:BulkInferRequest",
    "resolve": "intake.resolve_request:ResolveRequest",
    "tfx-pipeline": "intake.tfx_pipeline_options:TfxPipelineRequest",
    "vertex-job": "intake.vertex_request:JobOptions",
}
# Fields a checked option fills that live in the program of a train run, not on TrainRequest itself.
PROGRAM_FIELDS = {"train": {"run_fn", "module_sha256"}}


def test_every_checked_option_fills_a_field_of_its_request():
    import dataclasses
    import importlib

    for verb in _declarations():
        module, name = REQUESTS[verb.name].split(":")
        request_class = getattr(importlib.import_module(f"generic_trainer.{module}"), name)
        fields = {f.name for f in dataclasses.fields(request_class)}
        checked = {o.field or o.name for o in verb.options() if o.check}
        assert checked - PROGRAM_FIELDS.get(verb.name, set()) <= fields, (
            verb.name,
            checked - fields,
        )


def test_the_contract_names_every_verb_the_cli_runs():
    from generic_trainer import cli
    from generic_trainer.intake import contract

    listed = " ".join(contract.__doc__.split("\n\n")[1].split(":")[0].split())
    assert [name for name in cli.VERBS if name not in listed] == []


def test_every_component_input_is_declared_once_per_verb():
    from components import build

    names = {
        "train": "trainer",
        "tune": "tuner",
        "evaluate": "evaluator",
        "infra-validate": "infra_validator",
        "import-examples": "import_examples",
        "transform": "transform",
        "push": "pusher",
        "bulk-infer": "bulk_inferrer",
        "resolve": "resolver",
    }
    import yaml

    for verb in (v for v in _declarations() if v.component is not None):
        declared = [p.name or o.name for o in verb.options() if (p := o.param)]
        assert len(declared) == len(set(declared)), verb.name
        spec = yaml.safe_load(open(build.yaml_path(names[verb.name])).read())
        iface = next(iter(spec["components"].values()))
        compiled = {
            n
            for kind in ("inputDefinitions", "outputDefinitions")
            for group in ("artifacts", "parameters")
            for n in iface.get(kind, {}).get(group, {})
        }
        assert set(declared) == compiled, verb.name


def test_one_new_option_is_a_flag_a_component_input_and_a_request_field(tmp_path):
    """What adding an input takes: one Option in the verb's table (here added to a copy of
    tune's)."""
    import dataclasses

    from generic_trainer.errors import UserInputError
    from generic_trainer.intake import fit_options, options
    from generic_trainer.intake.common_options import EPILOG
    from generic_trainer.intake.request import raw_inputs, whole_number
    from kfp import compiler, dsl

    new = options.Option(
        "patience",
        help="epochs without improvement before stopping",
        metavar="N",
        param=options.value(int, "Epochs without improvement before stopping.", 3),
        check=whole_number(3),
    )
    search = next(g for g in fit_options.TUNE.groups if g.title == "search")
    verb = dataclasses.replace(
        fit_options.TUNE,
        groups=tuple(
            dataclasses.replace(g, options=g.options + (new,)) if g is search else g
            for g in fit_options.TUNE.groups
        ),
    )

    sub = argparse.ArgumentParser().add_subparsers()
    parser = options.add_parser(sub, verb, EPILOG)
    action = next(a for a in parser._actions if a.dest == "patience")
    assert action.option_strings == ["--patience"] and action.metavar == "N"
    assert parser.parse_args(["--patience", "5"]).patience == "5"

    path = tmp_path / "tuner.yaml"
    compiler.Compiler().compile(
        dsl.container_component(
            options.component_function(verb, lambda: dsl.ContainerSpec(image="i", command=["c"]))
        ),
        str(path),
    )
    import yaml

    iface = next(iter(yaml.safe_load(path.read_text())["components"].values()))
    param = iface["inputDefinitions"]["parameters"]["patience"]
    assert (param["parameterType"], param["defaultValue"], param["description"]) == (
        "NUMBER_INTEGER",
        3,
        "Epochs without improvement before stopping.",
    )

    assert options.checked_fields(verb, raw_inputs({"patience": "5"}, environ={}))["patience"] == 5
    assert options.checked_fields(verb, raw_inputs({}, environ={}))["patience"] == 3
    with pytest.raises(UserInputError, match="^--patience: expected a whole number >= 1"):
        options.checked_fields(verb, raw_inputs({"patience": "0"}, environ={}))


def test_every_verb_the_cli_offers_is_declared_and_has_no_other_flags():
    """No hand-written parser: each sub-command is a verb's declaration, flag for flag (vertex-job's
    container arguments included)."""
    from generic_trainer import cli

    parser = cli.build_parser()
    sub = parser._subparsers._group_actions[0]
    assert set(sub.choices) == set(cli.VERBS)
    for name, verb_parser in sub.choices.items():
        dests = {a.dest for a in verb_parser._actions if a.dest != "help"}
        declared = {o.name for o in cli.VERBS[name].declaration.options() if o.cli}
        assert dests == declared, name
