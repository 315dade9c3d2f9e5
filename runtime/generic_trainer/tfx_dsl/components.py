"""TFX 1.21's components (`tfx.v1.components`, `tfx.components`) with TFX's constructor signatures.

Each class takes TFX's arguments, in TFX's order, with TFX's defaults (a wrong or unknown
argument is Python's TypeError, as with TFX); it records its input channels, its other
arguments and its output channels for `plan`. Nothing runs here.
"""

from __future__ import annotations

import inspect
from typing import Any

from generic_trainer.tfx_dsl.artifacts import STANDARD_ARTIFACTS as A
from generic_trainer.tfx_dsl.nodes import BaseNode, Channel

FORMAT_TF_EXAMPLE = 6  # TFX's example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE

_EXAMPLE_GEN = (
    ("input_base", None),
    ("input_config", None),
    ("output_config", None),
    ("range_config", None),
)
_TRAINER = (
    ("statistics", None),
    ("examples", None),
    ("transformed_examples", None),
    ("transform_graph", None),
    ("schema", None),
    ("base_model", None),
    ("hyperparameters", None),
    ("module_file", None),
    ("run_fn", None),
    ("train_args", None),
    ("eval_args", None),
    ("custom_config", None),
    ("custom_executor_spec", None),
)
_REQUIRED = inspect.Parameter.empty

# name -> (arguments with defaults in TFX's order, the arguments that are channels, outputs).
SPECS: dict[str, tuple[tuple[tuple[str, Any], ...], frozenset[str], dict[str, str]]] = {
    "CsvExampleGen": (_EXAMPLE_GEN, frozenset(), {"examples": "Examples"}),
    "ImportExampleGen": (
        _EXAMPLE_GEN + (("payload_format", FORMAT_TF_EXAMPLE),),
        frozenset(),
        {"examples": "Examples"},
    ),
    "FileBasedExampleGen": (
        _EXAMPLE_GEN[:3]
        + (
            ("custom_config", None),
            ("range_config", None),
            ("output_data_format", None),
            ("output_file_format", None),
            ("custom_executor_spec", None),
        ),
        frozenset(),
        {"examples": "Examples"},
    ),
    "StatisticsGen": (
        (
            ("examples", _REQUIRED),
            ("schema", None),
            ("stats_options", None),
            ("exclude_splits", None),
        ),
        frozenset({"examples", "schema"}),
        {"statistics": "ExampleStatistics"},
    ),
    "SchemaGen": (
        (("statistics", _REQUIRED), ("infer_feature_shape", True), ("exclude_splits", None)),
        frozenset({"statistics"}),
        {"schema": "Schema"},
    ),
    "ImportSchemaGen": ((("schema_file", _REQUIRED),), frozenset(), {"schema": "Schema"}),
    "ExampleValidator": (
        (("statistics", _REQUIRED), ("schema", _REQUIRED), ("exclude_splits", None)),
        frozenset({"statistics", "schema"}),
        {"anomalies": "ExampleAnomalies"},
    ),
    "Transform": (
        (
            ("examples", _REQUIRED),
            ("schema", _REQUIRED),
            ("module_file", None),
            ("preprocessing_fn", None),
            ("splits_config", None),
            ("analyzer_cache", None),
            ("materialize", True),
            ("disable_analyzer_cache", False),
            ("force_tf_compat_v1", False),
            ("custom_config", None),
            ("disable_statistics", False),
            ("stats_options_updater_fn", None),
        ),
        frozenset({"examples", "schema", "analyzer_cache"}),
        {
            "transform_graph": "TransformGraph",
            "transformed_examples": "Examples",
            "updated_analyzer_cache": "TransformCache",
            "pre_transform_schema": "Schema",
            "pre_transform_stats": "ExampleStatistics",
            "post_transform_schema": "Schema",
            "post_transform_stats": "ExampleStatistics",
            "post_transform_anomalies": "ExampleAnomalies",
        },
    ),
    "Trainer": (
        _TRAINER,
        frozenset(
            {
                "statistics",
                "examples",
                "transformed_examples",
                "transform_graph",
                "schema",
                "base_model",
                "hyperparameters",
            }
        ),
        {"model": "Model", "model_run": "ModelRun"},
    ),
    "Tuner": (
        (
            ("examples", _REQUIRED),
            ("schema", None),
            ("transform_graph", None),
            ("base_model", None),
            ("module_file", None),
            ("tuner_fn", None),
            ("train_args", None),
            ("eval_args", None),
            ("tune_args", None),
            ("custom_config", None),
        ),
        frozenset({"examples", "schema", "transform_graph", "base_model"}),
        {"best_hyperparameters": "HyperParameters", "tuner_results": "TunerResults"},
    ),
    "Evaluator": (
        (
            ("examples", _REQUIRED),
            ("model", None),
            ("baseline_model", None),
            ("feature_slicing_spec", None),
            ("fairness_indicator_thresholds", None),
            ("example_splits", None),
            ("eval_config", None),
            ("schema", None),
            ("module_file", None),
            ("module_path", None),
        ),
        frozenset({"examples", "model", "baseline_model", "schema"}),
        {"evaluation": "ModelEvaluation", "blessing": "ModelBlessing"},
    ),
    "InfraValidator": (
        (
            ("model", _REQUIRED),
            ("serving_spec", _REQUIRED),
            ("examples", None),
            ("request_spec", None),
            ("validation_spec", None),
        ),
        frozenset({"model", "examples"}),
        {"blessing": "InfraBlessing"},
    ),
    "Pusher": (
        (
            ("model", None),
            ("model_blessing", None),
            ("infra_blessing", None),
            ("push_destination", None),
            ("custom_config", None),
            ("custom_executor_spec", None),
        ),
        frozenset({"model", "model_blessing", "infra_blessing"}),
        {"pushed_model": "PushedModel"},
    ),
    "BulkInferrer": (
        (
            ("examples", _REQUIRED),
            ("model", None),
            ("model_blessing", None),
            ("data_spec", None),
            ("model_spec", None),
            ("output_example_spec", None),
        ),
        frozenset({"examples", "model", "model_blessing"}),
        {"inference_result": "InferenceResult", "output_examples": "Examples"},
    ),
    "ExampleDiff": (
        (
            ("examples_test", _REQUIRED),
            ("examples_base", _REQUIRED),
            ("config", _REQUIRED),
            ("include_split_pairs", None),
        ),
        frozenset({"examples_test", "examples_base"}),
        {"example_diff_result": "ExamplesDiff"},
    ),
    "DistributionValidator": (
        (
            ("statistics", _REQUIRED),
            ("baseline_statistics", _REQUIRED),
            ("config", _REQUIRED),
            ("include_split_pairs", None),
        ),
        frozenset({"statistics", "baseline_statistics"}),
        {"anomalies": "ExampleAnomalies"},
    ),
}


class Component(BaseNode):
    """A TFX component; `TFX_NAME` is its TFX class name, `CLOUD` marks tfx.extensions' ones."""

    TFX_NAME = "Component"
    CLOUD = False
    __signature__: inspect.Signature

    def __init__(self, *args: Any, **kwargs: Any):
        bound = self.__signature__.bind(*args, **kwargs)
        bound.apply_defaults()
        channels = _CHANNEL_ARGS[self.TFX_NAME]
        given = {k: v for k, v in bound.arguments.items() if v is not None}
        for name in channels & given.keys():
            if not isinstance(given[name], Channel):
                raise TypeError(
                    f"{self.TFX_NAME}({name}=...) takes a channel (another node's "
                    f"outputs[...]), not {given[name]!r}"
                )
        outputs = {key: A[kind] for key, kind in SPECS[self.TFX_NAME][2].items()}
        super().__init__(
            inputs={k: v for k, v in given.items() if k in channels},
            exec_properties={k: v for k, v in given.items() if k not in channels},
            outputs=outputs,
        )


_CHANNEL_ARGS: dict[str, frozenset[str]] = {}


def component_class(name: str, spec_name: str | None = None, cloud: bool = False) -> type:
    """The class of TFX component `name` (arguments and outputs of `spec_name`, default `name`)."""
    arguments, channels, _ = SPECS[spec_name or name]
    parameters = [
        inspect.Parameter(arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
        for arg, default in arguments
    ]
    _CHANNEL_ARGS[spec_name or name] = channels
    return type(
        name,
        (Component,),
        {
            "TFX_NAME": spec_name or name,
            "CLOUD": cloud,
            "__signature__": inspect.Signature(parameters),
            "__doc__": f"TFX's {name} (its 1.21 arguments); `plan` maps it to this image.",
            "__module__": __name__,
        },
    )


COMPONENTS: dict[str, type] = {name: component_class(name) for name in SPECS}
globals().update(COMPONENTS)
