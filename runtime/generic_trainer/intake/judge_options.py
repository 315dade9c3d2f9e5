"""The inputs of evaluate, each declared once: flag, KFP component input, request check
(infra-validate's are infra_validate_options.py's; INFRA_VALIDATE is named here too, for the
judge verbs' callers).

See options.py for how each `Option` becomes a flag, a component input and a request field.
"""

from __future__ import annotations

from generic_trainer.errors import UserInputError
from generic_trainer.intake.common_options import common_groups
from generic_trainer.intake.data_options import BEAM
from generic_trainer.intake.evaluate_outputs import EVALUATE_OUTPUTS
from generic_trainer.intake.infra_validate_options import INFRA_VALIDATE  # noqa: F401
from generic_trainer.intake.options import (
    Component,
    Group,
    Option,
    Verb,
    artifact,
    value,
)
from generic_trainer.intake.request import (
    DEFAULT_PROBE_MEMORY,
    duration,
    existing,
    size,
    splits,
)


def feature_slicing_spec(raw: object, flag: str, value: object) -> tuple[tuple[str, ...], ...]:
    """TFX's FeatureSlicingSpec (JSON or a dict): its specs' column lists; () when unset."""
    from generic_trainer.artifacts import bounded_parse

    if value is None or value == "" or value == {}:
        return ()
    if isinstance(value, str):
        value = bounded_parse.load_json(value, flag)
    specs = value.get("specs") if isinstance(value, dict) else None
    columns = [s.get("column_for_slicing") if isinstance(s, dict) else None for s in specs or []]
    if not isinstance(specs, list) or not all(
        isinstance(c, list) and c and all(isinstance(n, str) and n for n in c) for c in columns
    ):
        raise UserInputError(
            flag, f'expected {{"specs": [{{"column_for_slicing": ["feature"]}}]}}, got {value!r}'
        )
    return tuple(tuple(c) for c in columns)


def fairness_thresholds(raw: object, flag: str, value: object) -> tuple[float, ...]:
    """Decision thresholds in [0, 1] ('0.25,0.5' or a list); () when unset."""
    if value is None or value == "" or value == []:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    try:
        out = tuple(float(v) for v in items)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        out = ()
    if not out or not all(0.0 <= v <= 1.0 for v in out):
        raise UserInputError(flag, f"expected decision thresholds in [0, 1], got {value!r}")
    return out


EVALUATE_INPUTS = Group(
    "inputs",
    (
        Option(
            "model",
            help="the model to judge: a train model dir (DIR/Format-Serving) or a SavedModel dir",
            metavar="DIR",
            param=artifact(
                "Model", "The model to judge (a trainer model: <model>/Format-Serving)."
            ),
        ),
        Option(
            "baseline_model",
            help="the model to compare with (e.g. the last blessed one); without it change "
            "thresholds are skipped",
            metavar="DIR",
            param=artifact(
                "Model",
                (
                    "The model to compare with (e.g. the last blessed one); without it change "
                    "thresholds\n"
                    "are skipped and the model is judged on its bounds."
                ),
                None,
            ),
        ),
        Option(
            "examples",
            help="examples in TFX layout: DIR/Split-<name>/*.gz (gs:// allowed)",
            metavar="DIR",
            param=artifact(
                "Dataset",
                "Examples in TFX layout: Split-<name>/*.gz (gzipped TFRecords of tf.Example).",
            ),
        ),
        Option(
            "schema",
            check=existing,
            help="tensorflow-metadata Schema: label and slice features are checked against it",
            metavar="FILE_OR_DIR",
            param=artifact(
                "Artifact",
                "tensorflow-metadata Schema; the label and slice features are checked against it.",
                None,
            ),
        ),
        Option(
            "eval_config",
            help=(
                'JSON (or a file of it): {"label_key": ..., "prediction_key", "problem", '
                '"metrics", "slices": '
                '[["feature"]], "thresholds": {"accuracy": {"lower_bound": 0.8, "change": '
                '{"direction": '
                '"higher_is_better", "absolute": -0.01}}}, "slice_thresholds", '
                '"example_weight_key", '
                '"confidence_intervals"}; or a TFMA EvalConfig (JSON or text proto); see the README'
            ),
            metavar="FILE_OR_JSON",
            param=value(
                dict,
                (
                    '{"label_key", "prediction_key", "problem", "metrics", "slices", '
                    '"thresholds",\n'
                    '"slice_thresholds", "example_weight_key", "confidence_intervals"}, or a TFMA '
                    "EvalConfig as "
                    'JSON;\nsee the README (thresholds: {"accuracy": {"lower_bound": 0.8, '
                    '"change": '
                    '{"direction":\n"higher_is_better", "absolute": -0.01}}}).'
                ),
            ),
        ),
        Option(
            "eval_splits",
            check=splits(("eval",)),
            help="splits to evaluate on (default eval)",
            metavar="a,b",
            param=value(list, 'Splits to evaluate on (default ["eval"]).', None),
        ),
        Option(
            "module_file",
            help="TFX evaluator module: custom_eval_shared_model and/or custom_extractors "
            "(a .py file, a gs:// URI, or a dotted module name)",
            metavar="PATH_OR_URI",
            param=value(
                str,
                "TFX evaluator module (custom_eval_shared_model, custom_extractors): a .py path,\n"
                "a gs:// URI or a dotted module name.",
                "",
            ),
        ),
        Option(
            "feature_slicing_spec",
            check=feature_slicing_spec,
            help='TFX\'s legacy FeatureSlicingSpec as JSON: {"specs": [{"column_for_slicing": '
            '["island"]}]}; its slices are added to the EvalConfig\'s',
            metavar="JSON",
            param=value(
                dict,
                'Legacy FeatureSlicingSpec (TFX): {"specs": [{"column_for_slicing": ["island"]}]}.',
                None,
            ),
        ),
        Option(
            "fairness_indicator_thresholds",
            check=fairness_thresholds,
            help="decision thresholds for TFMA's FairnessIndicators metric, e.g. 0.25,0.5,0.75",
            metavar="a,b",
            param=value(
                list, "Decision thresholds for TFMA's FairnessIndicators metric (TFX's).", None
            ),
        ),
    ),
)

EVALUATE_SANDBOX = Group(
    "sandbox",
    description="the models are served in a separate process with these limits; a "
    "model that passes them is NOT_BLESSED with the reason",
    options=(
        Option(
            "timeout",
            check=duration(300.0),
            help=(
                "the evaluation process must load the models, and then answer each batch, within "
                "this time "
                "(default 300)"
            ),
            metavar="SECONDS",
            param=value(
                float,
                "Seconds the sandboxed evaluation process has to load the models, then each batch.",
                300.0,
            ),
        ),
        Option(
            "memory_limit",
            check=size(DEFAULT_PROBE_MEMORY),
            help=(
                "address-space limit of the evaluation process, e.g. 8GiB (default), 512MiB; it "
                "then runs on "
                "CPU. 0: none (GPUs are used)"
            ),
            metavar="SIZE",
            param=value(
                str,
                "Address-space limit of the evaluation process (e.g. 8GiB: on CPU; 0: none, GPUs "
                "used).",
                "8GiB",
            ),
        ),
    ),
)

EVALUATE = Verb(
    "evaluate",
    help="evaluate a model against thresholds and a baseline, and bless it (TFX Evaluator)",
    description="Compute metrics of the model's serving_default on the eval split (overall and per "
    "slice), "
    "compare them with the eval config's thresholds and with a baseline model, and write a "
    "TFX-style blessing (BLESSED or NOT_BLESSED), the metrics and an HTML report. "
    "NOT_BLESSED is a result, not a failure: the exit code is 0.",
    component=Component(
        "generic_evaluator",
        "Evaluates a model's serving_default on the eval split against "
        "thresholds and a baseline (TFX Evaluator).",
    ),
    groups=(
        EVALUATE_INPUTS,
        EVALUATE_OUTPUTS,
        EVALUATE_SANDBOX,
        BEAM,
        *common_groups(cluster_timeout=False, training=False),
    ),
)
