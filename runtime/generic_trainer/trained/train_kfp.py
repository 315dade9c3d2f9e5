"""The executor output of a train run: the metadata of each KFP output artifact and the output
parameters (the SavedModel's URI and its serving image), from the request and the result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from generic_trainer.artifacts import outputs, serving_container
from generic_trainer.trained import model_artifact

if TYPE_CHECKING:
    from generic_trainer.artifacts.results import TrainResult
    from generic_trainer.fit.requests import TrainRequest

# (metadata of each output artifact by name, output parameter values): contract.KfpOutputValues.
KfpOutputValues = tuple[dict[str, dict[str, Any]], dict[str, str]]


def kfp_metadata(request: TrainRequest, result: TrainResult) -> dict[str, dict[str, Any]]:
    """Metadata of each KFP output artifact of a train run."""
    import tensorflow as tf

    keras_version = None
    try:
        if request.keras == "tf_keras":
            import tf_keras as keras_module
        else:
            import keras as keras_module
        keras_version = keras_module.__version__
    except ImportError:
        pass
    model = {
        "framework": "tensorflow",
        "tensorflow_version": tf.__version__,
        "keras": request.keras,
        "keras_version": keras_version,
        "serving_model_path": outputs.SERVING_DIR,
        "signature_names": result.model_info.get("signatures", []),
        "serving_inputs": result.model_info.get("serving_inputs", {}),
        "train_steps": result.train_steps,
        "strategy": result.strategy,
        "num_replicas": result.num_replicas,
    }
    model_uri = request.kfp.artifacts.get("model", {}).get("uri") if request.kfp else None
    if request.model_format == model_artifact.OTHER_FORMAT:  # no SavedModel: nothing to serve
        model.update(framework="other", model_format="other", files=result.model_info["files"])
    else:
        model.update(
            serving_container.model_registry_metadata(
                _serving_image(request, tf.__version__), model_uri, result.schemata
            )
        )
    model.update(model_artifact.kfp_metadata(result))
    return {
        "model": {k: v for k, v in model.items() if v is not None},
        "metrics": dict(result.metrics),
        "model_run": {"tensorboard_log_dir": request.model_run_dir},
    }


def _serving_image(request: TrainRequest, tf_version: str) -> str:
    return request.serving_image or serving_container.choose_image(
        tf_version, request.serving_accelerator, request.serving_image_region
    )


def kfp_parameters(request: TrainRequest, result: TrainResult) -> dict[str, str]:
    """The train component's output parameters the component declares: the SavedModel's URI and its
    image."""
    import tensorflow as tf

    model = request.kfp.artifacts.get("model") if request.kfp else None
    if not model or not request.kfp.parameters:
        return {}
    other = request.model_format == model_artifact.OTHER_FORMAT  # no TF Serving image for it
    return serving_container.kfp_parameters(
        model["uri"],
        outputs.SERVING_DIR,
        "" if other else _serving_image(request, tf.__version__),
        result.schemata,
        declared=request.kfp.parameters,
    )


def kfp_outputs(request: TrainRequest, result: TrainResult) -> KfpOutputValues:
    """The executor output of a train run: each artifact's metadata and the output parameters."""
    return kfp_metadata(request, result), kfp_parameters(request, result)
