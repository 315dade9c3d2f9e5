"""The request of resolve: the records dir to read and the output to fill, resolved (no
TensorFlow)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from generic_trainer.artifacts import storage
from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.errors import UserInputError
from generic_trainer.intake import options, resolve_options
from generic_trainer.intake.request import raw_inputs


@dataclasses.dataclass(frozen=True)
class ResolveRequest:
    """Every input of a resolve run: local paths (gs:// mapped under the gcs root)."""

    records_dir: str
    model_dir: str
    strategy: str = resolve_options.STRATEGIES[0]
    artifact_type: str = ""  # latest_artifact: the TFX type (a key of model_records.RECORDED)
    gcs_root: str = "/gcs"
    kfp: KfpOutputs | None = None


def _local(flag: str, value: Any, gcs_root: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserInputError(flag, "required: a directory or gs:// URI")
    return os.path.normpath(os.path.abspath(storage.local_path(value.strip(), gcs_root)))


def build_resolve_request(
    values: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    kfp: KfpOutputs | None = None,
) -> ResolveRequest:
    """Validate raw values (keyed by flag name, dashes as underscores) into a ResolveRequest.

    Args:
      values: the raw values.
      environ: the environment (os.environ by default).
      kfp: where KFP wants the outputs, in a KFP run.

    Returns:
      The request.
    """
    raw = raw_inputs(values, environ, kfp)
    request = ResolveRequest(
        records_dir=_local("--records-dir", values.get("records_dir"), raw.gcs_root),
        model_dir=_local("--model-dir", values.get("model_dir"), raw.gcs_root),
        gcs_root=raw.gcs_root,
        kfp=kfp,
        **options.checked_fields(resolve_options.RESOLVE, raw),
    )
    _check_artifact_type(request)
    return request


def _check_artifact_type(request: ResolveRequest) -> None:
    """latest_artifact needs a type some step records; latest_blessed_model takes none."""
    from generic_trainer.tfx_kfp.model_records import RECORDED

    kind = request.artifact_type
    if request.strategy == "latest_artifact" and kind not in RECORDED:
        recorded = ", ".join(f"{k} (by {v})" for k, v in RECORDED.items())
        raise UserInputError(
            "--artifact-type",
            f"{kind or '(none)'}: latest_artifact resolves a type the steps record: {recorded}",
        )
    if request.strategy != "latest_artifact" and kind:
        raise UserInputError("--artifact-type", "only latest_artifact takes an artifact type")
