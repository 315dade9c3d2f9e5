"""The option groups every verb ends with: the KFP contract ("KFP") and the runtime ("runtime").

`common_groups` gives them for one verb (the training verbs also get --keras and --strategy, train
--cluster-timeout); `params` makes some of them component inputs of that verb. See options.py for
how a declaration becomes a flag, a component input and a request field.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.fit.accelerator import ACCELERATORS
from generic_trainer.fit.cluster import PREFETCH_ENV, STRATEGIES, prefetch_wanted
from generic_trainer.intake.options import Check, Group, Option, Param
from generic_trainer.intake.request import (
    KERAS_CHOICES,
)
from generic_trainer.intake.values import (
    seconds,
)


def prefetch_switch(raw: Any, flag: str, value: Any) -> bool:
    """--prefetch-to-device (else $GENERIC_TRAINER_PREFETCH_TO_DEVICE, else auto): False when
    off."""
    given = value if value is not None else raw.environ.get(PREFETCH_ENV)
    wanted = prefetch_wanted(given)
    if wanted is None:
        raise UserInputError(flag, f"{given!r}: expected auto or off")
    return wanted


EPILOG = (
    "Exit codes: 0 ok, 2 bad input, 3 user code failed, 4 bad outputs, 5 cluster failure, "
    "143 preempted."
)


def seconds_flag(text: str) -> float:
    """argparse type of a flag in seconds: values.seconds' check, its message as argparse's
    error."""
    try:
        return seconds("", text)
    except UserInputError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix(": ")) from None


def common_groups(
    strategies: tuple[str, ...] = STRATEGIES,
    cluster_timeout: bool = True,
    training: bool = True,
    params: Mapping[str, Param] | None = None,
    checks: Mapping[str, Check] | None = None,
) -> tuple[Group, Group]:
    """The KFP and runtime groups of a verb.

    Args:
        strategies: the --strategy choices (tune's replicas search alone: no multi-worker).
        cluster_timeout: whether the verb takes --cluster-timeout (train).
        training: whether the verb runs user training code (--keras, --strategy, --accelerator,
            --prefetch-to-device); evaluate, infra-validate and the data verbs do not.
        params: option name -> Param, to make options component inputs of the verb.
        checks: option name -> Check, the request fields the options fill.

    Returns:
        The "KFP" group and the "runtime" group.
    """
    params, checks = params or {}, checks or {}
    runtime = [*(_training_options(strategies, cluster_timeout) if training else ()), *_ALWAYS]
    unknown = (set(params) | set(checks)) - {o.name for o in runtime}
    if unknown:
        raise ValueError(f"no such runtime options: {sorted(unknown)}")
    return KFP_GROUP, Group(
        "runtime",
        tuple(
            dataclasses.replace(
                o, param=params.get(o.name, o.param), check=checks.get(o.name, o.check)
            )
            for o in runtime
        ),
    )


def _training_options(strategies: tuple[str, ...], cluster_timeout: bool) -> list[Option]:
    """The runtime options of a verb that runs user training code."""
    multi_worker = " and TF_CONFIG/CLUSTER_SPEC" if "multi_worker_mirrored" in strategies else ""
    options = [
        Option(
            "keras",
            choices=KERAS_CHOICES,
            help="what tf.keras means for the user's module: auto (default: what TFX gives it, "
            "tf_keras when the module or a file of its own it imports imports tfx, "
            "tensorflow_transform or tfx_bsl, else Keras 3; Keras 3 for --task and tune), keras3 "
            "or tf_keras; unset, a set TF_USE_LEGACY_KERAS decides; decided before TensorFlow "
            "loads",
        ),
        Option(
            "strategy",
            choices=strategies,
            help=f"tf.distribute strategy; auto (default) matches GPUs{multi_worker}; any other "
            "value wins over a Task config's runtime.distribution_strategy",
        ),
        Option(
            "accelerator",
            choices=ACCELERATORS,
            help="auto (default): train on every GPU this machine has, and fail (exit 2) before "
            "training when TensorFlow cannot use them; gpu: also fail when there is none; cpu: "
            "train on the CPU on purpose",
        ),
        PREFETCH_OPTION,
    ]
    if cluster_timeout:
        options.append(
            Option(
                "cluster_timeout",
                metavar="SECONDS",
                type=seconds_flag,
                help="multi-worker: fail (exit 5) when the replicas have not all connected "
                "within this time (default 900)",
            )
        )
    return options


PREFETCH_OPTION = Option(
    "prefetch_to_device",
    choices=("auto", "off"),
    check=prefetch_switch,
    help="auto (default): a one-GPU run under the default strategy copies model.fit's batches to "
    f"the GPU ahead of each step; off: it does not (default ${PREFETCH_ENV}, else auto)",
    param=Param(
        "value",
        str,
        "auto: a one-GPU run copies model.fit's batches to the GPU ahead of each step; off: it\n"
        "does not (unset: $GENERIC_TRAINER_PREFETCH_TO_DEVICE, else auto).",
        None,
    ),
)
# Every verb's last runtime options.
_ALWAYS = (
    Option(
        "gcs_root",
        metavar="DIR",
        help="where gs:// is mounted (default /gcs, or $GENERIC_TRAINER_GCS_ROOT)",
    ),
    Option("log_level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR")),
)
KFP_GROUP = Group(
    "KFP",
    (
        Option(
            "executor_input",
            metavar="JSON",
            help="KFP executor input ('{{$}}'): every input and output is read from it",
        ),
        Option(
            "executor_output_file",
            metavar="FILE",
            help="where to write the executor output (default: outputs.outputFile of the "
            "executor input)",
        ),
    ),
)
