"""The request of push: a model, its blessings and a destination, resolved and checked before
anything is copied.

No TensorFlow: the model is checked to hold a SavedModel (saved_model.pb), the blessings (both
optional, as TFX's) to be directories (push.py reads their verdicts, a dir without the markers of
its kind being exit 2 there, still before anything is copied), the destination to be a directory (or
a gs:// URI under the Cloud Storage FUSE mount) outside the model.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts import files, outputs, storage
from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.errors import UserInputError
from generic_trainer.intake import options, push_options
from generic_trainer.intake.paths import (
    model_dir,
)
from generic_trainer.intake.request import (
    existing_path,
    raw_inputs,
)

FLAG = "--push-destination"


@dataclasses.dataclass(frozen=True)
class PushRequest:
    """Every input of a push run, resolved: local paths (gs:// mapped under the gcs root)."""

    model: str
    push_destination: str  # the local directory versions go under
    destination_uri: str  # the same as the user gave it (gs://...), for pushed_destination
    on_gcs_fuse: bool  # under the Cloud Storage FUSE mount: no atomic directory rename there
    model_blessing: str | None = None
    infra_blessing: str | None = None
    pushed_model_dir: str | None = None
    records_dir: str | None = None  # when pushed, the pushed model is recorded there (resolve)
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None


def destination_value(value: Any) -> str:
    """The base directory of --push-destination: a path or URI, or TFX's PushDestination as JSON."""
    if not isinstance(value, str) or not value.strip():
        raise UserInputError(FLAG, "required: a directory or gs:// URI for the pushed versions")
    value = value.strip()
    if not value.startswith("{"):
        return value
    try:
        spec = json.loads(value)
    except json.JSONDecodeError as e:
        raise UserInputError(
            FLAG,
            f"not valid JSON ({e.msg} at position {e.pos}); expected a directory, a gs:// "
            'URI or {"filesystem": {"base_directory": ...}}',
        ) from None
    filesystem = spec.get("filesystem") if isinstance(spec, dict) else None
    base = filesystem.get("base_directory") if isinstance(filesystem, dict) else None
    if set(spec) != {"filesystem"} or not isinstance(base, str) or not base.strip():
        raise UserInputError(
            FLAG,
            'only TFX\'s filesystem destination is supported: {"filesystem": '
            f'{{"base_directory": "DIR"}}}}, got {value[:200]}',
        )
    versioning = filesystem.get("versioning", "AUTO")
    if versioning not in ("AUTO", "UNIX_TIMESTAMP", 0, 1) or set(filesystem) - {
        "base_directory",
        "versioning",
    }:
        raise UserInputError(
            FLAG,
            f"filesystem.versioning {versioning!r} (or another key) is not supported: "
            "versions are Unix seconds (AUTO, UNIX_TIMESTAMP)",
        )
    return base.strip()


def _inside(path: str, directory: str) -> bool:
    return files.inside(os.path.realpath(path), os.path.realpath(directory))


def _destination(value: str, gcs_root: str, model: str) -> tuple[str, bool]:
    """(local directory, on the Cloud Storage FUSE mount) of the destination, checked."""
    if storage.is_gcs_uri(value) and not os.path.isdir(gcs_root):
        raise UserInputError(
            FLAG,
            f"{value} is written through the Cloud Storage FUSE mount at {gcs_root}, which "
            "does not exist here: mount the bucket there (Vertex AI does) or give --gcs-root",
        )
    if "://" in value and not storage.is_gcs_uri(value):
        raise UserInputError(FLAG, f"{value}: expected a directory or a gs:// URI")
    path = os.path.normpath(os.path.abspath(storage.local_path(value, gcs_root)))
    if os.path.lexists(path) and files.classify(path) != files.DIRECTORY:
        raise UserInputError(
            FLAG, f"{value} is {files.describe(path)}; expected a directory for the pushed versions"
        )
    if _inside(path, model):
        raise UserInputError(
            FLAG,
            f"{value} lies inside the model being pushed ({model}); give a directory outside it",
        )
    return path, storage.is_gcs_uri(value) or _inside(path, gcs_root)


def _model(value: Any, gcs_root: str) -> str:
    model = model_dir("--model", value, gcs_root, required=True)
    serving = outputs.serving_model_path(model)
    if not os.path.isfile(os.path.join(serving, "saved_model.pb")):
        raise UserInputError(
            "--model",
            f"{serving} holds no SavedModel (saved_model.pb): expected a train model dir "
            "(DIR/Format-Serving) or a SavedModel dir",
        )
    return os.path.normpath(os.path.abspath(model))


def build_push_request(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> PushRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into a PushRequest."""
    raw = raw_inputs(values, environ, kfp)
    model = _model(values.get("model"), raw.gcs_root)
    blessings = {}
    for key, kind in (
        ("model_blessing", "the evaluator"),
        ("infra_blessing", "the infra-validator"),
    ):
        flag = "--" + key.replace("_", "-")
        path = existing_path(flag, values.get(key), raw.gcs_root)
        if path and files.classify(path) != files.DIRECTORY:
            raise UserInputError(
                flag, f"{path} is {files.describe(path)} (expected {kind}'s blessing dir)"
            )
        if path:
            blessings[key] = os.path.abspath(path)
    uri = destination_value(values.get("push_destination"))
    destination, on_fuse = _destination(uri, raw.gcs_root, model)
    pushed = values.get("pushed_model_dir")
    pushed = (
        os.path.normpath(os.path.abspath(storage.local_path(pushed, raw.gcs_root)))
        if pushed
        else None
    )
    return PushRequest(
        model=model,
        push_destination=destination,
        on_gcs_fuse=on_fuse,
        destination_uri=uri.rstrip("/") if storage.is_gcs_uri(uri) else destination,
        pushed_model_dir=pushed,
        gcs_root=raw.gcs_root,
        kfp=kfp,
        **blessings,
        **options.checked_fields(push_options.PUSH, raw),
    )
