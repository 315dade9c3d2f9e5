"""The trainer arguments `vertex-job` puts in the container, checked here as the container would
check them.

`container_args` puts the verb first; `check_container_args` parses them with the verb's own parser
(the declaration in fit_options.py, as the container's `generic-trainer` does) and runs every check
of the request that reads no file (`fit_values.check_values`), so an unknown flag, `--train-steps
-5` or a malformed `--custom-config` is exit 2 naming the argument before a job is built, not a
failed job minutes later. Paths are not checked here: the container reads them on its own machine.
`loggable_args` masks `--custom-config`'s secret values for the log. No TensorFlow here.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence

from generic_trainer.artifacts.redaction import redact
from generic_trainer.errors import UserInputError
from generic_trainer.intake import fit_options, options
from generic_trainer.intake.fit_values import check_values

VERBS = {"train": fit_options.TRAIN, "tune": fit_options.TUNE}


def container_args(args: Sequence[str]) -> tuple[str, ...]:
    """The container's args after `--`: the verb first (train when none is given), then its
    flags."""
    args = list(args)
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        raise UserInputError(
            "--",
            "expected the trainer's arguments after `--`, e.g. "
            "-- --examples gs://B/examples --module-file gs://B/module.py",
        )
    if args[0] not in VERBS:
        if not args[0].startswith("-"):
            raise UserInputError(
                "--", f"unknown verb {args[0]!r}; expected one of {', '.join(VERBS)} or flags"
            )
        args = ["train", *args]
    if any(a == "--executor-input" or a.startswith("--executor-input=") for a in args):
        raise UserInputError(
            "--", "--executor-input is for KFP; a custom job passes the trainer's flags directly"
        )
    return tuple(args)


class _ArgumentError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing the usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _ArgumentError(message)


def check_container_args(args: Sequence[str], environ: Mapping[str, str]) -> None:
    """Parse `args` (container_args' result) with the verb's parser and check what reads no file.

    `environ`: the environment the container gets (vertex-job's --env), e.g. TF_USE_LEGACY_KERAS.
    """
    verb = VERBS[args[0]]
    root = _Parser(prog="generic-trainer", add_help=False)
    options.add_parser(root.add_subparsers(dest="verb"), verb, "")
    if "-h" in args or "--help" in args:
        raise UserInputError(
            f"-- {args[0]}", "--help is not an argument for a job (the container's arguments)"
        )
    try:
        parsed, unknown = root.parse_known_args(list(args))
        if unknown:  # named by their flags only: a value may be a secret
            flags = [a.split("=", 1)[0] for a in unknown if a.startswith("-")]
            raise _ArgumentError(
                f"unknown flags {', '.join(flags)}; `generic-trainer {args[0]} --help` lists them"
                if flags
                else f"{len(unknown)} value(s) not after a flag"
            )
        check_values(
            verb, {k: v for k, v in vars(parsed).items() if v is not None and k != "verb"}, environ
        )
    except _ArgumentError as e:
        raise UserInputError(f"-- {args[0]}", f"{e} (the container's arguments)") from None
    except UserInputError as e:
        raise UserInputError(f"-- {args[0]}", f"{e} (the container's arguments)") from None


def loggable_args(args: Sequence[str]) -> list[str]:
    """The container args with `--custom-config`'s secret values masked (redaction.redact), for the
    log."""
    out, after_flag = [], False
    for arg in args:
        flag, eq, value = arg.partition("=")
        if after_flag or (eq and flag == "--custom-config"):
            text = arg if after_flag else value
            try:
                masked = json.dumps(redact(json.loads(text)))
            except (ValueError, TypeError, AttributeError, RecursionError):
                masked = "***"
            arg = masked if after_flag else f"--custom-config={masked}"
        out.append(arg)
        after_flag = arg == "--custom-config"
    return out
