"""The inputs of infra-validate, each declared once: flag, KFP component input, request check.

See options.py for how each `Option` becomes a flag, a component input and a request field.
"""

from __future__ import annotations

from generic_trainer.intake.common_options import common_groups
from generic_trainer.intake.options import (
    Component,
    Group,
    Option,
    Verb,
    artifact,
    output,
    output_value,
    value,
)
from generic_trainer.intake.request import (
    DEFAULT_PROBE_MEMORY,
    MAX_WARMUP_REQUESTS,
    duration,
    existing,
    output_file,
    size,
    splits,
    whole_number,
)
from generic_trainer.intake.values import (
    number,
)


def warmup_count(raw: object, flag: str, value: object) -> int:
    """TF Serving warm-up requests to write: 0 (none) to MAX_WARMUP_REQUESTS."""
    return number(
        flag,
        value,
        maximum=MAX_WARMUP_REQUESTS,
        default=0,
        unit="warm-up requests (TF Serving reads at most 1000)",
    )


INFRA_VALIDATE_INPUTS = Group(
    "inputs",
    (
        Option(
            "model",
            help="a train model dir (DIR/Format-Serving) or a SavedModel dir",
            metavar="DIR",
            param=artifact("Model", "The model to try (a trainer model: <model>/Format-Serving)."),
        ),
        Option(
            "examples",
            help="examples in TFX layout: DIR/Split-<name>/*.gz (gs:// allowed)",
            metavar="DIR",
            param=artifact(
                "Dataset",
                "Examples in TFX layout; requests are the eval split's tf.Examples, in the "
                "signature's input\nform (serialized, or parsed into its tensor inputs).",
            ),
        ),
        Option(
            "eval_splits",
            check=splits(("eval",)),
            help="splits the requests are taken from (default eval)",
            metavar="a,b",
            param=value(list, 'Splits the requests are taken from (default ["eval"]).', None),
        ),
        Option(
            "model_blessing",
            help="the evaluator's blessing: a NOT_BLESSED model is not loaded and is "
            "INFRA_NOT_BLESSED",
            metavar="DIR",
            param=artifact(
                "Artifact",
                "The evaluator's blessing: a NOT_BLESSED model is not loaded and is "
                "INFRA_NOT_BLESSED.",
                None,
            ),
        ),
        Option(
            "schema",
            check=existing,
            help="tensorflow-metadata Schema describing the features a serving_default with tensor "
            "inputs is fed "
            "from (default: the first eval example's features)",
            metavar="FILE_OR_DIR",
            param=artifact(
                "Artifact",
                "tensorflow-metadata Schema describing the features a serving_default with tensor "
                "inputs "
                "is\nfed from (default: the first eval example's features).",
                None,
            ),
        ),
    ),
)

INFRA_VALIDATE_SANDBOX = Group(
    "sandbox",
    (
        Option(
            "num_requests",
            check=whole_number(10),
            help="timed requests (default 10; after two untimed warm-ups)",
            metavar="N",
            param=value(int, "Timed requests (after two warm-ups).", 10),
        ),
        Option(
            "batch_size",
            check=whole_number(8),
            help="examples per request (default 8)",
            metavar="N",
            param=value(int, "Serialized tf.Examples per request.", 8),
        ),
        Option(
            "timeout",
            check=duration(300.0),
            help="the serving process must load and answer everything within this time (default "
            "300)",
            metavar="SECONDS",
            param=value(
                float,
                "Seconds the serving process has to load the model and answer every request.",
                300.0,
            ),
        ),
        Option(
            "memory_limit",
            check=size(DEFAULT_PROBE_MEMORY),
            help="address-space limit of the serving process, e.g. 8GiB (default), 512MiB; 0: "
            "none. It runs on CPU",
            metavar="SIZE",
            param=value(
                str,
                "Address-space limit of the serving process (e.g. 8GiB; 0: none); it runs on CPU.",
                "8GiB",
            ),
        ),
    ),
)

INFRA_VALIDATE_OUTPUTS = Group(
    "outputs",
    (
        Option(
            "blessing_dir",
            help="where INFRA_BLESSED or INFRA_NOT_BLESSED goes",
            metavar="DIR",
            output="dir",
            published=True,
            param=output(
                "Artifact",
                (
                    "TFX-style blessing dir: INFRA_BLESSED or INFRA_NOT_BLESSED (the reason "
                    "inside); "
                    "metadata\n"
                    "blessed 1|0, p50/p99 latency."
                ),
                name="blessing",
            ),
        ),
        Option(
            "metrics_file",
            check=output_file,
            help="write load time and p50/p99 latency here as JSON",
            metavar="FILE",
            output="file",
            param=output(
                "Metrics",
                "Load time, p50 and p99 latency (ms), requests sent and failed.",
                name="metrics",
                fills="",
            ),
        ),
        Option(
            "write_warmup",
            check=warmup_count,
            help="when INFRA_BLESSED, write N TF Serving warm-up requests (eval examples, one "
            "each) into the "
            "model's assets.extra/tf_serving_warmup_requests (default 0: none; at most 1000)",
            metavar="N",
            param=value(
                int,
                "When INFRA_BLESSED, write this many TF Serving warm-up requests (eval examples, "
                "one\n"
                "each) into the model's Format-Serving/assets.extra/tf_serving_warmup_requests (0: "
                "none; "
                "max 1000).",
                0,
            ),
        ),
        # for dsl.If: whether the model may ship
        Option(
            "blessed",
            cli=False,
            param=output_value(
                bool,
                "True when the model is INFRA_BLESSED (so also blessed by the evaluator), for "
                "dsl.If.",
            ),
        ),
    ),
)

INFRA_VALIDATE = Verb(
    "infra-validate",
    help="try the model in a sandboxed serving process before it ships (TFX InfraValidator)",
    description="Load the model in a separate process with a time and memory limit, send batches "
    "of "
    "eval tf.Examples to serving_default (serialized, or parsed into its tensor inputs), check "
    "every request succeeds with the signature's output keys and shapes, record p50/p99 latency, "
    "and write INFRA_BLESSED or INFRA_NOT_BLESSED "
    "(with the reason). A broken model is a result, not a failure: the exit code is 0.",
    component=Component(
        "generic_infra_validator",
        "Tries a model in a sandboxed serving process before it ships (TFX InfraValidator).",
    ),
    groups=(
        INFRA_VALIDATE_INPUTS,
        INFRA_VALIDATE_SANDBOX,
        INFRA_VALIDATE_OUTPUTS,
        *common_groups(cluster_timeout=False, training=False),
    ),
)
