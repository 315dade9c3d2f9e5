"""Each TFX component's arguments as the parameters of this image's component (see `plan`).

One function per TFX component: it reads the node's arguments (TFX's exec properties) and
returns the step's parameters, named as in components/<name>/component.yaml, or refuses an
argument the image cannot honour, naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from generic_trainer.tfx_dsl import executors
from generic_trainer.tfx_dsl.nodes import BaseNode
from generic_trainer.tfx_dsl.plan_judges import bulk_inferrer, infra_validator, pusher
from generic_trainer.tfx_dsl.plan_values import Values, local_path, refuse, reject, split_dotted

_PAYLOAD_FORMATS = {6: "FORMAT_TF_EXAMPLE", 7: "FORMAT_TF_SEQUENCE_EXAMPLE"}


def _module(node: BaseNode, props: dict[str, Any], fn_arg: str) -> dict:
    """module_file plus the function name: TFX's `module_file=` (a file, maybe with `fn_arg`)
    or `fn_arg=` alone as a dotted path (`models.preprocessing.preprocessing_fn`)."""
    module_file, function = props.get("module_file"), props.get(fn_arg)
    if module_file and function and "." in str(function):
        raise refuse(node, fn_arg, "give module_file or a dotted function path, not both")
    if module_file:
        path = module_file if "://" in module_file or not module_file.endswith(".py") else None
        out = {"module_file": path or local_path(module_file)}
        return out | ({fn_arg: function} if function else {})
    if function:
        module, name = split_dotted(str(function), f"{node.id}.{fn_arg}")
        return {"module_file": module, fn_arg: name}
    raise refuse(node, "module_file", f"{node.TFX_NAME} needs module_file or {fn_arg}")


def example_gen(node: BaseNode, v: Values) -> dict[str, Any]:
    """CsvExampleGen / ImportExampleGen -> import_examples."""
    props = node.exec_properties
    if not props.get("input_base"):
        raise refuse(node, "input_base", "the folder of the files to import is needed")
    out: dict[str, Any] = {"input_pattern": local_path(v.json(props["input_base"], node.id))}
    out["format"] = "tfrecord" if node.TFX_NAME == "ImportExampleGen" else "csv"
    if node.TFX_NAME == "ImportExampleGen":
        fmt = props.get("payload_format", 6)
        if fmt not in _PAYLOAD_FORMATS:
            raise refuse(
                node,
                "payload_format",
                f"{fmt}: only tf.Example (6) or tf.SequenceExample (7) records are read here",
            )
        out["payload_format"] = _PAYLOAD_FORMATS[fmt]
    splits = (
        v.message(props["input_config"], f"{node.id}.input_config").get("splits", [])
        if (props.get("input_config") is not None)
        else []
    )
    if len(splits) > 1:
        out["input_splits"] = {s["name"]: s.get("pattern", "") for s in splits}
    elif splits and splits[0].get("pattern", "*") != "*":
        out["input_pattern"] = f"{out['input_pattern'].rstrip('/')}/{splits[0]['pattern']}"
    if props.get("output_config") is not None:
        out |= _output_config(node, v.message(props["output_config"], f"{node.id}.output_config"))
    if props.get("range_config") is not None:
        out["range_config"] = v.message(props["range_config"], f"{node.id}.range_config")
    return out


def _output_config(node: BaseNode, config: dict[str, Any]) -> dict[str, Any]:
    split = config.get("split_config", {})
    out: dict[str, Any] = {}
    if split.get("splits"):
        out["splits"] = ",".join(f"{s['name']}:{s.get('hash_buckets', 0)}" for s in split["splits"])
    if split.get("partition_feature_name"):
        out["partition_feature"] = split["partition_feature_name"]
    other = set(config) - {"split_config"} | set(split) - {"splits", "partition_feature_name"}
    if other:
        raise refuse(
            node,
            "output_config",
            f"{sorted(other)} cannot be honoured here: "
            "import_examples takes hash-bucket splits and a partition feature",
        )
    return out


def transform(node: BaseNode, v: Values) -> dict[str, Any]:
    """Transform -> transform."""
    props = node.exec_properties
    reject(
        node,
        props,
        {
            "stats_options_updater_fn": "TFDV statistics are not computed here (no TFDV)",
            "force_tf_compat_v1": "this image's transform runs TF2 only",
        },
    )
    if props.get("materialize") is False:
        raise refuse(
            node,
            "materialize",
            "the transform step always writes transformed "
            "examples (materialize=False is not supported)",
        )
    out = _module(node, props, "preprocessing_fn")
    if props.get("splits_config") is not None:
        config = v.message(props["splits_config"], f"{node.id}.splits_config")
        out |= {f"{key}_splits": config[key] for key in ("analyze", "transform") if config.get(key)}
    if props.get("custom_config"):
        out["custom_config"] = v.json(props["custom_config"], f"{node.id}.custom_config")
    return out


def _fit_args(node: BaseNode, v: Values, props: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("train_args", "eval_args"):
        if props.get(name) is not None:
            out[name] = v.message(props[name], f"{node.id}.{name}")
    if props.get("custom_config"):
        out["custom_config"] = v.json(props["custom_config"], f"{node.id}.custom_config")
    return out


def trainer(node: BaseNode, v: Values) -> dict[str, Any]:
    """Trainer -> trainer (`custom_executor_spec` only as TFX's default, GenericExecutor)."""
    props = node.exec_properties
    spec = props.get("custom_executor_spec")
    if spec is not None and not executors.is_generic_trainer(spec):
        executor = executors.executor_name(getattr(spec, "executor_class", spec))
        raise refuse(
            node,
            "custom_executor_spec",
            f"{executor} is not run here: this image's train step runs the module's run_fn, as "
            "TFX's GenericExecutor does (ExecutorClassSpec(GenericExecutor) is accepted); drop "
            "custom_executor_spec, or give tfx.components.Trainer a module with a run_fn",
        )
    return _module(node, props, "run_fn") | _fit_args(node, v, props)


def tuner(node: BaseNode, v: Values) -> dict[str, Any]:
    """Tuner -> tuner."""
    props = node.exec_properties
    reject(
        node,
        props,
        {
            "tune_args": "TuneArgs (parallel trials) is for the cloud Tuner; "
            "TFX's own Tuner executor refuses it too"
        },
    )
    return _module(node, props, "tuner_fn") | _fit_args(node, v, props)


def evaluator(node: BaseNode, v: Values) -> dict[str, Any]:
    """Evaluator -> evaluator (the EvalConfig as TFMA's JSON)."""
    props = node.exec_properties
    out: dict[str, Any] = {}
    if props.get("eval_config") is not None:
        out["eval_config"] = v.message(props["eval_config"], f"{node.id}.eval_config")
    if props.get("feature_slicing_spec") is not None:
        out["feature_slicing_spec"] = v.message(
            props["feature_slicing_spec"], f"{node.id}.feature_slicing_spec"
        )
    if props.get("fairness_indicator_thresholds"):
        out["fairness_indicator_thresholds"] = v.json(
            list(props["fairness_indicator_thresholds"]), f"{node.id}.fairness_indicator_thresholds"
        )
    if props.get("example_splits"):
        out["eval_splits"] = v.json(list(props["example_splits"]), f"{node.id}.example_splits")
    module = props.get("module_file") or props.get("module_path")
    if module:
        out["module_file"] = local_path(module) if str(module).endswith(".py") else module
    return out


# TFX component -> (this image's component, TFX input -> the component's input, parameters).
MAPPINGS: dict[str, tuple[str, dict[str, str], Callable[[BaseNode, Values], dict]]] = {
    "CsvExampleGen": ("import_examples", {}, example_gen),
    "ImportExampleGen": ("import_examples", {}, example_gen),
    "Transform": (
        "transform",
        {"examples": "examples", "schema": "schema", "analyzer_cache": "analyzer_cache"},
        transform,
    ),
    "Trainer": (
        "trainer",
        {
            "examples": "examples",
            "transformed_examples": "examples",
            "transform_graph": "transform_graph",
            "schema": "schema",
            "base_model": "base_model",
            "hyperparameters": "hyperparameters",
        },
        trainer,
    ),
    "Tuner": (
        "tuner",
        {
            "examples": "examples",
            "schema": "schema",
            "transform_graph": "transform_graph",
            "base_model": "base_model",
        },
        tuner,
    ),
    "Evaluator": (
        "evaluator",
        {
            "examples": "examples",
            "model": "model",
            "baseline_model": "baseline_model",
            "schema": "schema",
        },
        evaluator,
    ),
    "InfraValidator": (
        "infra_validator",
        {"model": "model", "examples": "examples"},
        infra_validator,
    ),
    "Pusher": (
        "pusher",
        {"model": "model", "model_blessing": "model_blessing", "infra_blessing": "infra_blessing"},
        pusher,
    ),
    "BulkInferrer": (
        "bulk_inferrer",
        {"examples": "examples", "model": "model", "model_blessing": "model_blessing"},
        bulk_inferrer,
    ),
}

# This image's component -> the outputs it writes (components/<name>/component.yaml).
OUTPUTS: dict[str, frozenset[str]] = {
    "import_examples": frozenset({"examples", "output_schema"}),
    "transform": frozenset({"transform_graph", "transformed_examples", "updated_analyzer_cache"}),
    "trainer": frozenset({"model", "model_run"}),
    "tuner": frozenset({"best_hyperparameters", "tuner_results"}),
    "evaluator": frozenset({"evaluation", "blessing"}),
    "infra_validator": frozenset({"blessing"}),
    "pusher": frozenset({"pushed_model"}),
    "bulk_inferrer": frozenset({"inference_result", "output_examples"}),
}
