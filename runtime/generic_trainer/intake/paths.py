"""The paths of a request resolved: inputs that must exist, output dirs (given, or Vertex's AIP_*
defaults), the checkpoint dir namespaced per pipeline run and task, the examples dir and its split
file patterns (--examples resolved once), model dirs, a data verb's paths as Beam reads them. Each
error names its flag. No TensorFlow.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.artifacts import storage
from generic_trainer.errors import UserInputError
from generic_trainer.intake.request import existing_path

log = logging.getLogger(__name__)


def out_dir(value: str | None, env: str, environ: Mapping[str, str], gcs_root: str) -> str | None:
    """An output directory: the value given, else the environment variable `env` (Vertex's
    AIP_*)."""
    value = value or environ.get(env)
    return os.path.normpath(storage.local_path(value, gcs_root)) if value else None


_RUN_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def run_namespace(values: Mapping[str, Any]) -> str | None:
    """`<run id>/<task name>` from --run-id / --task-name (KFP's placeholders), or None when not in
    a pipeline run.

    A value still reading `{{$...}}` is a placeholder the runner did not fill: treated as absent.
    """
    parts = []
    for key, flag in (("run_id", "--run-id"), ("task_name", "--task-name")):
        value = str(values.get(key) or "").strip()
        if not value or value.startswith("{{"):
            if value:
                log.warning(
                    "%s %s was not filled in by the pipeline runner; checkpoints are not "
                    "namespaced by it",
                    flag,
                    value,
                )
            if key == "run_id":
                return None
            continue
        if not _RUN_PART.fullmatch(value):
            raise UserInputError(
                flag, f"expected a name of letters, digits, '.', '_' or '-', got {value!r}"
            )
        parts.append(value)
    return "/".join(parts)


def checkpoint_dir(
    values: Mapping[str, Any], environ: Mapping[str, str], gcs_root: str, default: str
) -> str:
    """Where checkpoints go: --checkpoint-dir, else $AIP_CHECKPOINT_DIR, else `default` (inside this
    task's outputs).

    In a pipeline run (--run-id) the first two are base dirs shared by every run, so the run's own
    dir is `<base>/<run id>/<task name>`: a retried task finds its checkpoints again, a new run
    starts fresh.
    """
    base = values.get("checkpoint_dir") or environ.get("AIP_CHECKPOINT_DIR")
    if not base:
        return default
    path = os.path.normpath(storage.local_path(base, gcs_root))
    namespace = run_namespace(values)
    if namespace:
        path = os.path.join(path, namespace)
        log.info(
            "checkpoint dir %s: run %s's own under %s",
            path,
            namespace,
            "--checkpoint-dir" if values.get("checkpoint_dir") else "AIP_CHECKPOINT_DIR",
        )
    return path


def examples_dir(values: Mapping[str, Any], gcs_root: str) -> str:
    examples = values.get("examples")
    if not examples:
        raise UserInputError(
            "--examples", "required: the examples directory (TFX layout Split-<name>/*.gz)"
        )
    examples_path = storage.local_path(examples, gcs_root)
    if not os.path.isdir(examples_path):
        raise UserInputError(
            "--examples",
            f"{examples} is not a directory"
            + ("" if os.path.exists(examples_path) else " (it does not exist)"),
        )
    return examples_path


def split_patterns(
    examples: str, splits: Sequence[str], input_name: str = "--examples"
) -> tuple[str, ...]:
    """--examples resolved once, at intake: one file pattern per split the verb reads.

    Each is `<examples>/Split-<name>/*` (the old layout `<examples>/<name>/*` too), byte for byte
    what TFX's trainer executor puts in FnArgs.train_files / eval_files (`os.path.join(split_uri,
    "*")`). The requests carry these; no verb expands --examples again.

    Args:
      examples: the local examples dir (`examples_dir`); "" for none.
      splits: the splits the verb reads; () for none.
      input_name: the input errors name.

    Returns:
      The patterns, in split order; () when `examples` or `splits` is empty.

    Raises:
      UserInputError: a split missing or holding no files (naming `input_name` and the split).
    """
    if not examples or not splits:
        return ()
    from generic_trainer.records import example_files

    return tuple(example_files.split_file_patterns(examples, splits, input_name))


def model_dir(input_name: str, value: Any, gcs_root: str, required: bool) -> str | None:
    """A model artifact dir (holding Format-Serving) or a SavedModel dir; None when absent and not
    required."""
    if not value:
        if required:
            raise UserInputError(
                input_name,
                "required: a model dir (<dir>/Format-Serving, as train writes it) "
                "or a SavedModel dir",
            )
        return None
    path = existing_path(input_name, value, gcs_root)
    if not os.path.isdir(path):
        raise UserInputError(input_name, f"{value} is not a directory")
    return path


def required_out_dir(input_name: str, value: Any, gcs_root: str, what: str) -> str:
    if not value:
        raise UserInputError(input_name, f"required: {what}")
    return os.path.normpath(storage.local_path(value, gcs_root))


def data_path(value: str, gcs_root: str, local_runner: bool) -> str:
    """A path Beam reads or writes: gs:// stays a URI for a remote runner, else the local (/gcs)
    path."""
    if storage.is_gcs_uri(value) and not local_runner:
        return value
    return storage.local_path(value, gcs_root)


def new_output_dir(
    input_name: str, value: Any, gcs_root: str, local_runner: bool, what: str
) -> str:
    if not value:
        raise UserInputError(input_name, f"required: {what}")
    path = data_path(str(value), gcs_root, local_runner)
    if not storage.is_gcs_uri(path):
        path = os.path.normpath(path)
        if os.path.isdir(path) and os.listdir(path):
            raise UserInputError(
                input_name,
                f"{value} already exists and is not empty; give a new directory "
                "(outputs are written whole, never over an older one)",
            )
        if os.path.exists(path) and not os.path.isdir(path):
            raise UserInputError(
                input_name, f"{value} exists and is a file; expected a new directory"
            )
    return path
