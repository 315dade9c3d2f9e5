"""Every verb's flags, exactly: a dump of each sub-parser (its help, groups and every action's option
strings, dest, metavar, help, choices, default, type and action) compared with tests/cli_flags.json.

The flags are generated from one declaration per input (generic_trainer.options); this pins the
CLI a user sees, so a change to the declarations that changes a flag shows here. After adding or
changing a flag on purpose, regenerate the snapshot: `python tests/test_cli_flags.py --update`.
"""

import argparse
import json
import pathlib
import sys

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
        actions = [{
            "option_strings": a.option_strings, "dest": a.dest, "metavar": a.metavar, "help": a.help,
            "choices": list(a.choices) if a.choices is not None and not isinstance(a.choices, dict) else None,
            "default": a.default if a.default is None or isinstance(a.default, (str, int, float, bool)) else repr(
                a.default),
            "type": _name(a.type), "nargs": a.nargs, "const": a.const, "required": a.required,
            "action": type(a).__name__,
        } for a in group._group_actions]
        groups.append({"title": group.title, "description": group.description, "actions": actions})
    return {"prog": parser.prog, "description": parser.description, "epilog": parser.epilog,
            "order": [a.dest for a in parser._actions], "groups": groups}


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
        assert actual["verbs"][verb] == expected["verbs"][verb], f"{verb}'s flags changed (see module docstring)"
    assert actual == expected


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_cli_flags.py --update  (rewrites tests/cli_flags.json)")
    SNAPSHOT.write_text(json.dumps(dump_all(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}")
