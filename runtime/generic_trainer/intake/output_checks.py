"""Every output path of a request checked before any heavy work (no TensorFlow here).

A read-only or file-typed `--model-dir`, an unwritable `--metrics-file` or executor-output file
would otherwise fail after minutes of training, or after the model was published. Each output
(and, for a path that does not exist yet, the nearest existing directory above it) is checked by
creating and removing a small probe file there, which is what counts on read-only mounts,
immutable directories and Cloud Storage FUSE alike. An output file that exists and is not a regular
file (a device, FIFO or socket, or a symlink to one) is refused: it would be replaced. An output
under the gs:// mount root whose bucket is not mounted there is refused (it would be written to the
machine's own disk and lost). No output may lie inside another (but for the runtime's own layout:
`logs/` in the model dir, checkpoints in the logs; and an output file in the model dir outside the
parts a model replaces, or in the logs) or inside an input, nor an input inside an output. A failure
is one UserInputError naming the flag.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.artifacts import files, storage
from generic_trainer.artifacts.outputs import EVAL_DIR, SERVING_DIR
from generic_trainer.artifacts.serving_container import SCHEMATA_DIR
from generic_trainer.errors import UserInputError
from generic_trainer.intake.options import OutputField, Verb, output_fields, published_dirs
from generic_trainer.intake.writable import check_mounted, check_writable
from generic_trainer.tflite.options import TFLITE_DIR


@dataclasses.dataclass(frozen=True)
class VerbOutputs:
    """A verb's output paths, derived from its declaration (`verb_outputs`): (request attribute,
    flag, "dir" | "file") of each, those published whole by renaming a staging sibling into place,
    and its
    path inputs ((request attribute, flag) of each) no output may overlap."""

    fields: tuple[OutputField, ...]
    published: tuple[str, ...] = ()
    inputs: tuple[tuple[str, str], ...] = ()


# Metavars of the options whose value is a path (or a path or something else: FILE_OR_JSON).
PATH_METAVARS = ("DIR", "FILE", "PATH")
# Path options that are no input: KFP's output file (an output, checked on its own), the gs://
# mount.
NOT_INPUTS = ("executor_output_file", "gcs_root")


def verb_inputs(verb: Verb) -> tuple[tuple[str, str], ...]:
    """Every path input `verb` declares: its input artifacts (models, examples, blessings, schemas)
    and its other options whose value is a path (modules, configs, hyperparameters)."""
    found = []
    for o in verb.options():
        artifact = o.param is not None and o.param.kind == "input"
        if o.name in NOT_INPUTS:
            continue
        if not o.output and (artifact or any(m in (o.metavar or "") for m in PATH_METAVARS)):
            found.append((o.field or o.name, o.flag))
    return tuple(found)


def verb_outputs(verb: Verb) -> VerbOutputs:
    """The outputs `verb` declares (options with `output`), plus the copy of the logs the runtime
    keeps beside
    --model-run-dir when TensorBoard's dir is the platform's (`model_run_copy_dir`)."""
    fields: list[OutputField] = []
    for field in output_fields(verb):
        fields.append(field)
        if field[0] == "model_run_dir":
            fields.append(("model_run_copy_dir", field[1], "dir"))
    return VerbOutputs(tuple(fields), published_dirs(verb), verb_inputs(verb))


EXECUTOR_OUTPUT_FLAG = "--executor-output-file"
# (inner, outer): outputs the runtime itself nests (the defaults: <model-dir>/logs,
# <logs>/checkpoints).
NESTING = {
    ("model_run_dir", "model_dir"),
    ("model_run_copy_dir", "model_dir"),
    ("checkpoint_dir", "model_run_dir"),
    ("checkpoint_dir", "model_run_copy_dir"),
}
# Dirs an output file may lie in (a metrics file beside the model), but for the parts the runtime
# replaces whole.
FILE_HOSTS = {
    "model_dir": (SERVING_DIR, EVAL_DIR, SCHEMATA_DIR, TFLITE_DIR),
    "model_run_dir": (),
    "model_run_copy_dir": (),
}


def output_dirs(request: Any, verb: Verb) -> list[tuple[str | None, str]]:
    """(path, flag) of each output dir `verb` declares, as `outputs.exclusive_all` holds them."""
    return [(getattr(request, a, None), f) for a, f, kind in output_fields(verb) if kind == "dir"]


def check_outputs(
    request: Any,
    executor_output_file: str | None = None,
    outputs: VerbOutputs | None = None,
    values: Mapping[str, Any] | None = None,
) -> None:
    """Raise UserInputError for the first output of `request` that cannot be written.

    `outputs`: the verb's (the face passes them; by default train's). `values`: the raw values
    (flags, KFP's), for the path of an input whose request field holds what was read from it (the
    hyperparameters). A gs:// URI (a Beam runner elsewhere writes it) is not checked here.
    """
    if outputs is None:
        from generic_trainer.intake.fit_options import TRAIN

        outputs = verb_outputs(TRAIN)
    probed: dict[str, str | None] = {}
    gcs_root = getattr(request, "gcs_root", None)
    check_overlaps(request, outputs.fields, outputs.inputs, values)
    for attr, flag, kind in outputs.fields:
        path = getattr(request, attr, None)
        if path and not storage.is_gcs_uri(path):
            check_mounted(flag, path, gcs_root)
            check_writable(flag, path, kind, probed)
            if attr in outputs.published:
                parent = os.path.dirname(os.path.normpath(os.path.abspath(path)))
                check_writable(
                    flag,
                    parent,
                    "dir",
                    probed,
                    why=f" (the run stages {os.path.basename(os.path.normpath(path))} beside it, "
                    "and locks it there, before publishing it whole)",
                )
    kfp = getattr(request, "kfp", None)
    output_file = executor_output_file or (kfp.output_file if kfp is not None else None)
    if output_file:
        check_mounted(EXECUTOR_OUTPUT_FLAG, output_file, gcs_root)
        check_writable(EXECUTOR_OUTPUT_FLAG, output_file, "file", probed)


def _allowed(inner: tuple[str, str, str, str], outer: tuple[str, str, str, str]) -> bool:
    """Whether the output `inner` may lie in `outer` ((attr, flag, real path, kind) each): the
    runtime's own
    nesting, or an output file in a dir of FILE_HOSTS outside the parts the runtime replaces
    whole."""
    (attr, _, path, kind), (other, _, other_path, _) = inner, outer
    if (attr, other) in NESTING:
        return True
    if kind == "file" and other in FILE_HOSTS and path != other_path:
        return not any(
            files.inside(path, os.path.join(other_path, part)) for part in FILE_HOSTS[other]
        )
    return False


def check_overlaps(
    request: Any,
    fields: tuple[OutputField, ...],
    inputs: tuple[tuple[str, str], ...] = (),
    values: Mapping[str, Any] | None = None,
) -> None:
    """UserInputError when an output lies inside another output or an input, or an input inside an
    output (`--checkpoint-dir` in `--model-dir`, `--model-dir` in `--examples`, `--pushed-model-dir`
    as a blessing; `inputs`: the verb's, `verb_inputs`): publishing one would delete or mix into the
    other. The runtime's own nesting is allowed (`_allowed`); the innermost dir decides
    (`<model-dir>/logs/checkpoints` lies in the logs, which may lie in the model dir)."""

    def real(attr: str, raw_name: str | None = None) -> str | None:
        path = getattr(request, attr, None)
        raw = (values or {}).get(raw_name) if raw_name else None
        if not isinstance(path, str) and isinstance(raw, str) and raw:
            path = storage.local_path(raw, getattr(request, "gcs_root", None) or "/gcs")
        return (
            os.path.realpath(path)
            if isinstance(path, str) and path and not storage.is_gcs_uri(path)
            else None
        )

    outs = [(attr, flag, real(attr), kind) for attr, flag, kind in fields if real(attr)]
    written = {attr for attr, _, _ in fields}
    ins = [
        (flag, real(attr, flag[2:].replace("-", "_")))
        for attr, flag in inputs
        if attr not in written
    ]
    for out in outs:
        attr, flag, path, _ = out
        containers = [o for o in outs if o[0] != attr and files.inside(path, o[2])]
        innermost = max(containers, key=lambda o: len(o[2]), default=None)
        for other in containers:
            if (other is innermost or other[2] == path) and not _allowed(out, other):
                raise UserInputError(
                    flag,
                    f"{path} lies inside {other[1]} {other[2]}; give each output its own "
                    "place (one would delete or mix into the other)",
                )
    check_apart([(flag, path) for _, flag, path, _ in outs], ins)


def check_apart(
    outputs: Sequence[tuple[str, str]], inputs: Sequence[tuple[str, str | None]]
) -> None:
    """UserInputError when an output ((flag, path) each) lies inside an input or holds one (None
    and missing inputs aside): it would be written into the input, or replace it."""
    for flag, path in outputs:
        path = os.path.realpath(path)
        for other_flag, other_path in inputs:
            if not other_path or not os.path.lexists(other_path):
                continue
            other_path = os.path.realpath(other_path)
            if files.inside(path, other_path) or files.inside(other_path, path):
                where = "inside" if files.inside(path, other_path) else "around"
                raise UserInputError(
                    flag,
                    f"{path} lies {where} the input {other_flag} {other_path}; an output "
                    "must not be written into an input, nor hold one",
                )
