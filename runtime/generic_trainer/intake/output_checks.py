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
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.artifacts import files, storage
from generic_trainer.artifacts.outputs import EVAL_DIR, SERVING_DIR
from generic_trainer.artifacts.serving_container import SCHEMATA_DIR
from generic_trainer.errors import UserInputError
from generic_trainer.intake.options import OutputField, Verb, output_fields, published_dirs
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


def check_mounted(flag: str, path: str, gcs_root: str | None) -> None:
    """UserInputError when `path` lies under the gs:// mount root but its bucket is not mounted
    there: the
    output would be written to this machine's own disk and lost when it ends (as a gs:// input is
    refused)."""
    if not gcs_root:
        return
    root, path = os.path.abspath(gcs_root), os.path.abspath(path)
    if not path.startswith(root + os.sep):
        return
    bucket = os.path.relpath(path, root).split(os.sep)[0]
    if not os.path.isdir(os.path.join(root, bucket)):
        mount = (
            f"{root} does not exist" if not os.path.isdir(root) else f"{root} holds no {bucket}/"
        )
        raise UserInputError(
            flag,
            f"gs://{bucket}/{os.path.relpath(path, os.path.join(root, bucket))} is not "
            f"mounted: Cloud Storage is read and written through {root} (Cloud Storage FUSE, "
            f"as on Vertex AI), and {mount}; an output written there would stay on this "
            "machine's disk and be lost. Mount the bucket there, or set --gcs-root "
            "(GENERIC_TRAINER_GCS_ROOT) to where it is mounted",
        )


def _inside(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def _allowed(inner: tuple[str, str, str, str], outer: tuple[str, str, str, str]) -> bool:
    """Whether the output `inner` may lie in `outer` ((attr, flag, real path, kind) each): the
    runtime's own
    nesting, or an output file in a dir of FILE_HOSTS outside the parts the runtime replaces
    whole."""
    (attr, _, path, kind), (other, _, other_path, _) = inner, outer
    if (attr, other) in NESTING:
        return True
    if kind == "file" and other in FILE_HOSTS and path != other_path:
        return not any(_inside(path, os.path.join(other_path, part)) for part in FILE_HOSTS[other])
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
        containers = [o for o in outs if o[0] != attr and _inside(path, o[2])]
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
            if _inside(path, other_path) or _inside(other_path, path):
                where = "inside" if _inside(path, other_path) else "around"
                raise UserInputError(
                    flag,
                    f"{path} lies {where} the input {other_flag} {other_path}; an output "
                    "must not be written into an input, nor hold one",
                )


def _nearest_existing(path: str) -> str:
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def _probe(directory: str) -> str | None:
    """None when a file can be created (and removed) in `directory`, else the reason."""
    probe = os.path.join(directory, f".write-check-{uuid.uuid4().hex[:12]}")
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        return e.strerror or str(e)
    return None


def check_writable(
    flag: str, path: str, kind: str, probed: dict[str, str | None] | None = None, why: str = ""
) -> None:
    """Raise UserInputError(flag) unless `path` (a "dir" or a "file") can be created or replaced."""
    probed = {} if probed is None else probed
    path = os.path.normpath(os.path.abspath(path))
    if kind == "dir" and os.path.islink(path):
        raise UserInputError(
            flag,
            f"{path} is {files.describe(path)}; an output dir is published by renaming it into "
            "place, which would replace the link: give the directory itself",
        )
    if os.path.exists(path):
        if kind == "dir" and not os.path.isdir(path):
            raise UserInputError(
                flag,
                f"{path} is {files.describe(path)}; expected a directory (or a path where "
                "one can be created)",
            )
        if kind == "file" and os.path.isdir(path):
            raise UserInputError(flag, f"{path} is a directory; expected a file path")
        if kind == "file" and files.not_replaceable(path):
            raise UserInputError(
                flag, f"{files.not_replaceable(path)}: give a file path (or a new one)"
            )
        if kind == "file" and not os.access(path, os.W_OK):
            raise UserInputError(flag, f"{path} exists and cannot be replaced (it is read-only)")
        directory = path if kind == "dir" else os.path.dirname(path)
    else:
        directory = _nearest_existing(os.path.dirname(path))
        if not os.path.isdir(directory):
            what = files.describe(directory)
            raise UserInputError(
                flag, f"cannot create {path}: {directory} is {what}, not a directory"
            )
    if directory not in probed:
        probed[directory] = _probe(directory)
    if probed[directory] is not None:
        where = "" if directory == path else f": cannot create files in {directory}"
        raise UserInputError(flag, f"{path} is not writable{where} ({probed[directory]}){why}")
