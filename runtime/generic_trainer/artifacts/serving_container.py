"""What Vertex AI Model Registry needs of a trained model: a serving container and the SavedModel's
URI.

A leaf module (no TensorFlow, no Google Cloud libraries). Vertex serves a TensorFlow SavedModel with
its prebuilt TF Serving images,
`<region>-docker.pkg.dev/vertex-ai/prediction/tf2-{cpu|gpu}.2-<minor>:latest`. The image is chosen
from the TensorFlow version the model was trained with (the same minor version, else the newest
prebuilt one older than it, with a warning) and the serving accelerator; `--serving-image` overrides
the choice. The model artifact's metadata then carries `containerSpec` as GCPC's
`google.UnmanagedContainerModel` wants it, and the trainer's `serving_model_uri` /
`serving_container_image` outputs let a pipeline import the model for `ModelUploadOp` (see the
README).
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from generic_trainer.errors import UserInputError

log = logging.getLogger(__name__)

ACCELERATORS = ("cpu", "gpu")
REGIONS = ("us", "europe", "asia")
# Minor versions of TensorFlow 2 with a prebuilt Vertex AI prediction image (cpu and gpu), as listed
# by
# google-cloud-aiplatform 1.165 (google.cloud.aiplatform.constants.prediction.TF_CONTAINER_URIS).
PREBUILT_TF2_MINORS = tuple(range(1, 16))
IMAGE = "{region}-docker.pkg.dev/vertex-ai/prediction/tf2-{accelerator}.2-{minor}:latest"


def check_options(
    image: str | None, accelerator: str | None, region: str | None
) -> tuple[str | None, str, str]:
    """Validate --serving-image, --serving-accelerator and --serving-image-region; returns them with
    defaults."""
    accelerator = (accelerator or "cpu").lower()
    if accelerator not in ACCELERATORS:
        raise UserInputError("--serving-accelerator", f"expected cpu or gpu, got {accelerator!r}")
    region = (region or "us").lower()
    if region not in REGIONS:
        raise UserInputError(
            "--serving-image-region",
            f"expected one of {', '.join(REGIONS)} (the prebuilt images' "
            f"multi-regions), got {region!r}",
        )
    if image and (any(c.isspace() for c in image) or "/" not in image):
        raise UserInputError(
            "--serving-image", f"expected a container image URI (registry/path:tag), got {image!r}"
        )
    return image or None, accelerator, region


@functools.cache  # one warning per run, however often it is asked
def choose_image(tf_version: str, accelerator: str = "cpu", region: str = "us") -> str:
    """The prebuilt TF Serving image for a model trained with `tf_version` (e.g. "2.21.0")."""
    match = re.match(r"2\.(\d+)", tf_version)
    if not match:
        raise ValueError(f"not a TensorFlow 2 version: {tf_version!r}")
    minor = int(match.group(1))
    if minor in PREBUILT_TF2_MINORS:
        return IMAGE.format(region=region, accelerator=accelerator, minor=minor)
    older = [m for m in PREBUILT_TF2_MINORS if m < minor]
    chosen = IMAGE.format(
        region=region, accelerator=accelerator, minor=max(older or PREBUILT_TF2_MINORS)
    )
    log.warning(
        "no prebuilt Vertex AI prediction image for TensorFlow %s: the model artifact names %s, "
        "the newest "
        "one older than it. TF Serving loads a newer SavedModel when it uses no newer ops; deploy "
        "it once "
        "to check, or give --serving-image (the serving_image parameter) a TF Serving image of "
        "your own",
        tf_version,
        chosen,
    )
    return chosen


SCHEMATA_DIR = "schemata"
SCHEMA_FILES = {"instanceSchemaUri": "instance.yaml", "predictionSchemaUri": "prediction.yaml"}
_OPENAPI_TYPES = {
    "string": {"type": "string"},
    "bool": {"type": "boolean"},
    "float16": {"type": "number", "format": "float"},
    "bfloat16": {"type": "number", "format": "float"},
    "float32": {"type": "number", "format": "float"},
    "float64": {"type": "number", "format": "double"},
    **{
        f"{s}int{b}": {"type": "integer", "format": "int64" if b == 64 else "int32"}
        for s in ("", "u")
        for b in (8, 16, 32, 64)
    },
}


def openapi_schema(title: str, tensors: Mapping[str, str]) -> dict[str, Any] | None:
    """An OpenAPI 3 schema object of one instance (or prediction) of a signature, from its tensors
    as `outputs.validate_serving_model` describes them (`{"x": "float32(None, 3)"}`; the first dim
    is the batch).
    None when a tensor's dtype or rank is unknown."""
    properties: dict[str, Any] = {}
    for name, spec in tensors.items():
        match = re.fullmatch(r"(\w+)\((.*)\)", spec)
        item = _OPENAPI_TYPES.get(match.group(1)) if match else None
        if item is None:
            return None
        item = dict(item)
        for dim in reversed([d.strip() for d in match.group(2).split(",") if d.strip()][1:]):
            item = {"type": "array", "items": item}
            if dim.isdigit():
                item.update(minItems=int(dim), maxItems=int(dim))
        properties[name] = item
    return {
        "title": title,
        "type": "object",
        "required": sorted(properties),
        "properties": properties,
    }


def write_schemata(model_dir: str, model_info: Mapping[str, Any]) -> list[str]:
    """Write `<model_dir>/schemata/instance.yaml` and `prediction.yaml` (Vertex's predictSchemata)
    for the serving
    signature, when its inputs and outputs are known; returns the file names written."""
    import yaml

    from generic_trainer.artifacts import storage

    written = []
    for key, title, tensors in (
        ("instanceSchemaUri", "Instance", model_info.get("serving_inputs")),
        ("predictionSchemaUri", "Prediction", model_info.get("serving_outputs")),
    ):
        schema = openapi_schema(title, tensors or {}) if tensors else None
        if schema is None:
            continue
        path = os.path.join(model_dir, SCHEMATA_DIR, SCHEMA_FILES[key])
        storage.write_file_atomic(path, yaml.safe_dump(schema, sort_keys=False))
        written.append(SCHEMA_FILES[key])
    return written


def model_registry_metadata(
    image: str, model_uri: str | None = None, schemata: Sequence[str] = ()
) -> dict[str, Any]:
    """Model artifact metadata that `google.UnmanagedContainerModel` (GCPC's ModelUploadOp) reads:
    containerSpec,
    and predictSchemata for the schema files written under `<model_uri>/schemata`."""
    metadata: dict[str, Any] = {"containerSpec": {"imageUri": image}}
    uris = {
        key: f"{model_uri.rstrip('/')}/{SCHEMATA_DIR}/{name}"
        for key, name in SCHEMA_FILES.items()
        if model_uri and name in schemata
    }
    if uris:
        metadata["predictSchemata"] = uris
    return metadata


def kfp_parameters(
    model_uri: str,
    serving_path: str,
    image: str,
    schemata: Sequence[str] = (),
    declared: Sequence[str] | None = None,
) -> dict[str, str]:
    """The trainer's output parameters for a model-registry import: the SavedModel's URI, the image
    and the schema files' URIs ("" for one not written). Only those the component declares
    (`declared`) are returned.
    """
    uris = model_registry_metadata(image, model_uri, schemata).get("predictSchemata", {})
    values = {
        "serving_model_uri": model_uri.rstrip("/") + "/" + serving_path,
        "serving_container_image": image,
        "instance_schema_uri": uris.get("instanceSchemaUri", ""),
        "prediction_schema_uri": uris.get("predictionSchemaUri", ""),
    }
    return {k: v for k, v in values.items() if declared is None or k in declared}
