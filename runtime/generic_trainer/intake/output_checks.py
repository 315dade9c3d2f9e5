"""Every output path of a request checked writable before any heavy work (no TensorFlow here).

A read-only or file-typed `--model-dir`, an unwritable `--metrics-file` or executor-output file
would otherwise fail after minutes of training, or after the model was published. Each output
(and, for a path that does not exist yet, the nearest existing directory above it) is checked by
creating and removing a small probe file there, which is what counts on read-only mounts,
immutable directories and Cloud Storage FUSE alike. A failure is one UserInputError naming the flag.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from generic_trainer.artifacts import storage
from generic_trainer.errors import UserInputError

# request attribute -> (flag, "dir" | "file"); the same names in every verb's request.
OUTPUT_FIELDS = (
    ("model_dir", "--model-dir", "dir"),
    ("model_run_dir", "--model-run-dir", "dir"),
    ("model_run_copy_dir", "--model-run-dir", "dir"),
    ("checkpoint_dir", "--checkpoint-dir", "dir"),
    ("best_hyperparameters_dir", "--best-hyperparameters-dir", "dir"),
    ("blessing_dir", "--blessing-dir", "dir"),
    ("metrics_file", "--metrics-file", "file"),
    ("report_file", "--report-file", "file"),
    ("tuner_results_file", "--tuner-results-file", "file"),
)
# The data verbs' outputs (their request attributes differ: transform_graph is an input of train).
IMPORT_EXAMPLES_OUTPUTS = (("output", "--output", "dir"), ("schema_output", "--schema-output", "dir"))
TRANSFORM_OUTPUTS = (("transform_graph", "--transform-graph", "dir"),
                     ("transformed_examples", "--transformed-examples", "dir"))
EXECUTOR_OUTPUT_FLAG = "--executor-output-file"
# Output dirs published by renaming a staging sibling into place: their parent must be writable too.
PUBLISHED_DIRS = ("model_dir", "best_hyperparameters_dir", "blessing_dir", "pushed_model_dir")


def check_outputs(request: Any, executor_output_file: str | None = None,
                  fields: tuple[tuple[str, str, str], ...] = OUTPUT_FIELDS) -> None:
    """Raise UserInputError for the first output of `request` that cannot be written.

    `fields`: (request attribute, flag, "dir" | "file") of its outputs. A gs:// URI (a Beam runner
    elsewhere writes it) is not checked here.
    """
    probed: dict[str, str | None] = {}
    for attr, flag, kind in fields:
        path = getattr(request, attr, None)
        if path and not storage.is_gcs_uri(path):
            check_writable(flag, path, kind, probed)
            if attr in PUBLISHED_DIRS:
                parent = os.path.dirname(os.path.normpath(os.path.abspath(path)))
                check_writable(flag, parent, "dir", probed,
                               why=f" (the run stages {os.path.basename(os.path.normpath(path))} beside it, "
                                   "and locks it there, before publishing it whole)")
    kfp = getattr(request, "kfp", None)
    output_file = executor_output_file or (kfp.output_file if kfp is not None else None)
    if output_file:
        check_writable(EXECUTOR_OUTPUT_FLAG, output_file, "file", probed)


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


def check_writable(flag: str, path: str, kind: str, probed: dict[str, str | None] | None = None,
                   why: str = "") -> None:
    """Raise UserInputError(flag) unless `path` (a "dir" or a "file") can be created or replaced."""
    probed = {} if probed is None else probed
    path = os.path.normpath(os.path.abspath(path))
    if os.path.exists(path):
        if kind == "dir" and not os.path.isdir(path):
            raise UserInputError(flag, f"{path} is a file; expected a directory (or a path where one can be "
                                       "created)")
        if kind == "file" and os.path.isdir(path):
            raise UserInputError(flag, f"{path} is a directory; expected a file path")
        if kind == "file" and not os.access(path, os.W_OK):
            raise UserInputError(flag, f"{path} exists and cannot be replaced (it is read-only)")
        directory = path if kind == "dir" else os.path.dirname(path)
    else:
        directory = _nearest_existing(os.path.dirname(path))
        if not os.path.isdir(directory):
            raise UserInputError(flag, f"cannot create {path}: {directory} is a file, not a directory")
    if directory not in probed:
        probed[directory] = _probe(directory)
    if probed[directory] is not None:
        where = "" if directory == path else f": cannot create files in {directory}"
        raise UserInputError(flag, f"{path} is not writable{where} ({probed[directory]}){why}")
