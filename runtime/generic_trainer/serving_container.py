"""What Vertex AI Model Registry needs of a trained model: a serving container and the SavedModel's URI.

A leaf module (no TensorFlow, no Google Cloud libraries). Vertex serves a TensorFlow SavedModel with its
prebuilt TF Serving images, `<region>-docker.pkg.dev/vertex-ai/prediction/tf2-{cpu|gpu}.2-<minor>:latest`.
The image is chosen from the TensorFlow version the model was trained with (the same minor version, else
the newest prebuilt one older than it, with a warning) and the serving accelerator; `--serving-image`
overrides the choice. The model artifact's metadata then carries `containerSpec` as GCPC's
`google.UnmanagedContainerModel` wants it, and the trainer's `serving_model_uri` /
`serving_container_image` outputs let a pipeline import the model for `ModelUploadOp` (see the README).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping
from typing import Any

from generic_trainer.errors import UserInputError

log = logging.getLogger(__name__)

ACCELERATORS = ("cpu", "gpu")
REGIONS = ("us", "europe", "asia")
# Minor versions of TensorFlow 2 with a prebuilt Vertex AI prediction image (cpu and gpu), as listed by
# google-cloud-aiplatform 1.165 (google.cloud.aiplatform.constants.prediction.TF_CONTAINER_URIS).
PREBUILT_TF2_MINORS = tuple(range(1, 16))
IMAGE = "{region}-docker.pkg.dev/vertex-ai/prediction/tf2-{accelerator}.2-{minor}:latest"


def check_options(image: str | None, accelerator: str | None, region: str | None) -> tuple[str | None, str, str]:
    """Validate --serving-image, --serving-accelerator and --serving-image-region; returns them with defaults."""
    accelerator = (accelerator or "cpu").lower()
    if accelerator not in ACCELERATORS:
        raise UserInputError("--serving-accelerator", f"expected cpu or gpu, got {accelerator!r}")
    region = (region or "us").lower()
    if region not in REGIONS:
        raise UserInputError("--serving-image-region", f"expected one of {', '.join(REGIONS)} (the prebuilt images' "
                                                       f"multi-regions), got {region!r}")
    if image and (any(c.isspace() for c in image) or "/" not in image):
        raise UserInputError("--serving-image", f"expected a container image URI (registry/path:tag), got {image!r}")
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
    chosen = IMAGE.format(region=region, accelerator=accelerator, minor=max(older or PREBUILT_TF2_MINORS))
    log.warning("no prebuilt Vertex AI prediction image for TensorFlow %s: the model artifact names %s, the newest "
                "one older than it. TF Serving loads a newer SavedModel when it uses no newer ops; deploy it once "
                "to check, or give --serving-image (the serving_image parameter) a TF Serving image of your own",
                tf_version, chosen)
    return chosen


def model_registry_metadata(image: str) -> dict[str, Any]:
    """Model artifact metadata that `google.UnmanagedContainerModel` (GCPC's ModelUploadOp) reads."""
    return {"containerSpec": {"imageUri": image}}


def kfp_parameters(model_uri: str, serving_path: str, image: str,
                   declared: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The trainer's output parameters for a model-registry import: the SavedModel's URI and the image.

    Only those the component declares (`declared`, output parameter names) are returned.
    """
    values = {"serving_model_uri": model_uri.rstrip("/") + "/" + serving_path, "serving_container_image": image}
    return {k: v for k, v in values.items() if declared is None or k in declared}
