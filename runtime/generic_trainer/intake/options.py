"""One declaration per input: each verb's flags, KFP component signature and simple request fields.

A verb's inputs are a `Verb`: `Group`s of `Option`s, in the order `--help` shows them. From it
- `add_parser(sub, verb, epilog)` makes the verb's argparse sub-parser (cli.build_parser),
- `component_function(verb, container)` makes the function kfp's `@dsl.container_component` compiles
  (components/specs.py): one parameter per option with a `Param`, its docstring from the params'
  docs,
- `checked_fields(verb, raw)` gives the request field of every option with a `check` (the *_request
  modules' builders; the fields that depend on each other are resolved there by hand).

The tables: fit_options.py (train, tune), judge_options.py (evaluate, infra-validate),
data_options.py (the Beam group), example_gen_options.py (import-examples), transform_options.py
(transform), push_options.py (push), infer_options.py (bulk-infer), doctor_options.py (doctor),
export_options.py (export-tflite), vertex_options.py (vertex-job); common_options.py has the KFP
and runtime groups every verb ends with.

To add an input, add one `Option` to its verb's table, e.g. in fit_options.py's tune "search" group:

    Option("patience", check=whole_number(3), metavar="N",
           help="epochs without improvement before stopping",              # the flag --patience
           param=value(int, "Epochs without improvement before stopping.", 3)),  # the component
           input

then give the request dataclass its field (`patience: int = 3` on TuneRequest; a test checks every
checked option names one) and run `python -m components.build` (the YAML) and
`python tests/test_cli_flags.py --update` (the pinned flags). `check` is one of request.py's checks
(text, existing, output_file, step_count, splits, sha256, whole_number, duration, size) or any
`(raw, flag, value) -> field value` raising UserInputError; leave it out when the builder resolves
the field itself. `cli=False` makes a component input only (train_args, whose `spread` says kfp_io
spreads it over train_steps and train_splits); no `param`, a flag only (--gcs-root). A `Param`'s
name is the component's when it differs from the option's (the `model` output artifact fills
--model-dir).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from generic_trainer.artifacts.kfp_io import ArtifactMaps

REQUIRED = inspect.Parameter.empty  # a component input without a default: the pipeline must give it


@dataclasses.dataclass(frozen=True)
class Param:
    """How an option appears in the KFP component's signature (and so in its YAML interface).

    kind: "value" (a parameter: str, int, float, bool, dict or list), "input" (an input artifact of
    kfp.dsl class `type`), "output" (an output artifact), "output_value" (an output parameter).
    A default of None makes the annotation Optional[...] (kfp: isOptional).
    """

    kind: str
    type: Any
    doc: str
    default: Any = REQUIRED
    name: str | None = None  # the component's name for it, when not the option's
    # an output artifact: the raw value its local path fills ("": none; None: the option's)
    fills: str | None = None


def value(type_: type, doc: str, default: Any = REQUIRED, name: str | None = None) -> Param:
    """A component input parameter of `type_` (str, int, float, bool, dict, list)."""
    return Param("value", type_, doc, default, name)


def artifact(cls: str, doc: str, default: Any = REQUIRED, name: str | None = None) -> Param:
    """An input artifact of kfp.dsl class `cls` ("Dataset", "Model", "Artifact"); default None:
    optional."""
    return Param("input", cls, doc, default, name)


def output(cls: str, doc: str, name: str | None = None, fills: str | None = None) -> Param:
    """An output artifact of kfp.dsl class `cls` ("Model", "Artifact", "Metrics", "HTML",
    "Dataset").

    Its local path fills the option's raw value, or `fills` ("": none; the metrics artifact's
    metadata holds what --metrics-file would)."""
    return Param("output", cls, doc, REQUIRED, name, fills)


def output_value(type_: type, doc: str, name: str | None = None) -> Param:
    """An output parameter (`dsl.OutputPath(type_)`), e.g. a URI a later task reads."""
    return Param("output_value", type_, doc, None, name)


# A request field from a raw value: check(raw, flag, value) -> the field's value; raises
# UserInputError.
Check = Callable[[Any, str, Any], Any]


@dataclasses.dataclass(frozen=True)
class Option:
    """One input of a verb: its flag (unless `cli` is False), its component param, its request
    check."""

    name: str  # the raw value's key: the flag's dest, the KFP parameter's name (unless param.name)
    help: str | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    default: Any = None
    type: Callable[[str], Any] | None = None
    action: Any = None  # argparse action ("append", argparse.BooleanOptionalAction); None: store
    cli: bool = True
    # a dict parameter whose keys fill other raw values (train_args: {"num_steps": "train_steps"})
    spread: Mapping[str, str] | None = None
    required: bool = False  # a flag the command line must give (argparse's required)
    param: Param | None = None
    check: Check | None = None
    field: str | None = None  # the request field `check` fills (default: name)
    # an output path of the verb: "dir" or "file" (checked writable before any work)
    output: str | None = None
    # an output dir published whole by renaming a staging sibling into place
    published: bool = False
    # a positional argument (its `name` is its dest), e.g. vertex-job's container arguments
    positional: bool = False
    nargs: Any = None  # argparse's nargs (argparse.REMAINDER: everything after it)

    @property
    def flag(self) -> str:
        return self.name if self.positional else "--" + self.name.replace("_", "-")

    def flag_kwargs(self) -> dict[str, Any]:
        kwargs = {
            "metavar": self.metavar,
            "choices": self.choices,
            "default": self.default,
            "type": self.type,
            "action": self.action,
            "help": self.help,
            "required": self.required or None,
            "nargs": self.nargs,
        }
        return {k: v for k, v in kwargs.items() if v is not None}


@dataclasses.dataclass(frozen=True)
class Group:
    """A titled group of options (an argparse argument group)."""

    title: str
    options: tuple[Option, ...]
    description: str | None = None


@dataclasses.dataclass(frozen=True)
class Component:
    """The KFP container component of a verb: its function name (the component's name) and
    summary."""

    function: str
    summary: str
    run_identity: bool = False  # args also get --run-id/--task-name from KFP (train and tune)


@dataclasses.dataclass(frozen=True)
class Verb:
    """A verb's declaration: its sub-command texts and its groups of options."""

    name: str
    help: str
    description: str
    groups: tuple[Group, ...]
    component: Component | None = None
    epilog: str | None = None  # None: the CLI's (the exit codes)

    def options(self) -> Iterator[Option]:
        for group in self.groups:
            yield from group.options


def artifact_maps(verb: Verb) -> ArtifactMaps:
    """The artifact maps of `verb`'s component, from its own declaration only: one artifact name
    may fill different values in different verbs (evaluate's `metrics` fills --metrics-file)."""
    inputs: dict[str, str] = {}
    outputs: dict[str, str | None] = {}
    spreads: dict[str, Mapping[str, str]] = {}
    for o in verb.options():
        if o.param is None:
            continue
        name = o.param.name or o.name
        if o.spread:
            spreads[name] = o.spread
        if o.param.kind == "input":
            inputs[name] = o.name
        elif o.param.kind == "output":
            outputs[name] = o.name if o.param.fills is None else (o.param.fills or None)
    return ArtifactMaps(inputs, outputs, spreads)


# (request attribute, flag, "dir" | "file") of an output path.
OutputField = tuple[str, str, str]


def output_fields(verb: Verb) -> tuple[OutputField, ...]:
    """The verb's output paths in declaration order (checked writable before any heavy work)."""
    return tuple((o.field or o.name, o.flag, o.output) for o in verb.options() if o.output)


def published_dirs(verb: Verb) -> tuple[str, ...]:
    """The request attributes of the verb's output dirs published whole from a staging sibling."""
    return tuple(o.field or o.name for o in verb.options() if o.output and o.published)


def replace(options: tuple[Option, ...], **changes: Mapping[str, Any]) -> tuple[Option, ...]:
    """`options` with the named ones changed, e.g. replace(opts, base_model={"param":
    artifact(...)})."""
    unknown = set(changes) - {o.name for o in options}
    if unknown:
        raise ValueError(f"no such options: {sorted(unknown)}")
    return tuple(
        dataclasses.replace(o, **changes[o.name]) if o.name in changes else o for o in options
    )


def add_parser(sub: Any, verb: Verb, epilog: str) -> argparse.ArgumentParser:
    """The verb's sub-parser, its flags in the declared groups and order."""
    parser = sub.add_parser(
        verb.name, help=verb.help, description=verb.description, epilog=verb.epilog or epilog
    )
    for group in verb.groups:
        add_group(parser, group)
    return parser


def add_group(parser: argparse.ArgumentParser, group: Group) -> None:
    """The group's flags (those with `cli`) as an argument group of `parser` (a verb's, or one
    taking the same flags: the Vertex pipeline's takes vertex-job's production group)."""
    flags = [o for o in group.options if o.cli]
    if flags:
        g = parser.add_argument_group(group.title, group.description)
        for option in flags:
            g.add_argument(
                option.name if option.positional else option.flag, **option.flag_kwargs()
            )


def checked_fields(verb: Verb, raw: Any) -> dict[str, Any]:
    """The request fields of every option of `verb` with a `check`, from `raw`
    (request.RawInputs)."""
    return {
        o.field or o.name: o.check(raw, o.flag, raw.values.get(o.name))
        for o in verb.options()
        if o.check
    }


def component_params(verb: Verb) -> list[tuple[str, Param]]:
    """(component name, Param) of the verb's component inputs and outputs, those without a default
    first."""
    params = [(o.param.name or o.name, o.param) for o in verb.options() if o.param]
    return sorted(params, key=lambda item: item[1].default is not REQUIRED)


def component_function(verb: Verb, container: Callable[[], Any]) -> Callable[..., Any]:
    """The function `@dsl.container_component` turns into the verb's component (kfp reads its
    signature and docstring, then calls it with placeholders to get the ContainerSpec that
    `container()` returns)."""
    from typing import Optional  # noqa: UP035 - kfp reads the annotations as types

    from kfp import dsl

    if verb.component is None:
        raise ValueError(f"{verb.name} has no component")
    parameters, docs = [], []
    for name, param in component_params(verb):
        if param.kind == "value":
            annotation = param.type
        elif param.kind == "input":
            annotation = dsl.Input[getattr(dsl, param.type)]
        elif param.kind == "output":
            annotation = dsl.Output[getattr(dsl, param.type)]
        else:
            annotation = dsl.OutputPath(param.type)
        if param.default is None and param.kind != "output_value":
            annotation = Optional[annotation]  # noqa: UP045
        parameters.append(
            inspect.Parameter(
                name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=param.default,
                annotation=annotation,
            )
        )
        docs.append(f"    {name}: " + param.doc.replace("\n", "\n        "))

    def function(*placeholders: Any) -> Any:
        return container()

    function.__name__ = function.__qualname__ = verb.component.function
    function.__signature__ = inspect.Signature(parameters)
    function.__doc__ = verb.component.summary + "\n\nArgs:\n" + "\n".join(docs) + "\n"
    return function
