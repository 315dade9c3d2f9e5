"""vertex-job's production options checked: scheduling, network, encryption and the chief and
Reduction Server pools.

Declared in vertex_options.py (`PRODUCTION`), checked here (`production_options`) without
google-cloud-aiplatform, for `vertex-job` and for the Vertex pipeline
(pipelines/vertex_multiworker_pipeline.py), which compiles with the same options. The machines are
checked against the known families in `vertex_machines`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from generic_trainer import vertex_machines
from generic_trainer.errors import UserInputError
from generic_trainer.intake.values import (
    MAX_SECONDS,
    number,
)
from generic_trainer.intake.vertex_options import (
    DEFAULT_MACHINE_TYPE,
    DEFAULT_REDUCTION_SERVER_MACHINE_TYPE,
    REDUCTION_SERVER_IMAGE,
    SCHEDULING_STRATEGIES,
)

log = logging.getLogger("generic_trainer.vertex")

MAX_REPLICAS = 1000  # more replicas than a Vertex AI custom job takes is a typo
MAX_ACCELERATORS = 16  # the most accelerators a Vertex AI machine has


def count(flag: str, value: Any, minimum: int, maximum: int) -> int:
    """A whole-number flag within [minimum, maximum] (`minimum` when unset)."""
    return number(flag, value, minimum=minimum, maximum=maximum, default=minimum)


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(flag: str, value: Any, allow_zero: bool = False) -> int | None:
    """Whole seconds from `3600`, `90m`, `2h` or `7d` (at most 30 days); None when unset."""
    if value is None or value == "":
        return None
    text = str(value).strip().lower()
    scale = _DURATION_UNITS.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in _DURATION_UNITS else text
    seconds = int(digits) * scale if digits.isdigit() else -1
    if not (0 if allow_zero else 1) <= seconds <= MAX_SECONDS:
        raise UserInputError(
            flag,
            f"expected a duration such as 3600, 90m, 2h or 7d, in seconds >= "
            f"{0 if allow_zero else 1} and at most {MAX_SECONDS}"
            f"{' (0: no limit)' if allow_zero else ''}, got {value!r}",
        )
    return seconds


def _labels(pairs: Sequence[str] | None) -> dict[str, str]:
    """--label KEY=VALUE pairs, checked against Google Cloud's label rules."""
    labels = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if (
            not sep
            or not re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", key)
            or not re.fullmatch(r"[a-z0-9_-]{0,63}", value)
        ):
            raise UserInputError(
                "--label",
                f"expected key=value in lowercase letters, digits, '_' or '-' (key "
                f"starting with a letter, each at most 63 characters), got {pair!r}",
            )
        labels[key] = value
    if len(labels) > 64:
        raise UserInputError("--label", f"at most 64 labels, got {len(labels)}")
    return labels


# A raw value by option name, None when unset or empty.
Opt = Callable[[str], Any]


def production_options(
    values: Mapping[str, Any],
    replica_count: int,
    accelerator_type: str | None,
    accelerator_count: int,
) -> dict[str, Any]:
    """The JobOptions fields of the production options (vertex_options.PRODUCTION), validated.

    Also checks the machines and warns when a GPU needs more than the default image
    (vertex_machines.image_note).

    Args:
        values: the raw values by option name (flags, or the pipeline's keywords); `machine_type`
            and `region` are read too.
        replica_count: the job's replicas, checked.
        accelerator_type: the workers' accelerator, or None.
        accelerator_count: the workers' accelerators per replica, checked.

    Returns:
        The JobOptions fields the production options fill.

    Raises:
        UserInputError: an option that is malformed or does not fit the others, named.
    """

    def opt(name: str) -> Any:
        return values.get(name) or None

    allow_unknown = bool(opt("allow_unknown_machine_type"))
    machine_type = opt("machine_type") or DEFAULT_MACHINE_TYPE
    vertex_machines.check_machine(
        machine_type, accelerator_type, accelerator_count, allow_unknown=allow_unknown
    )
    out = _scheduling(opt)
    out.update(_network_and_key(opt))
    out.update(_chief_pool(opt, machine_type, accelerator_type, accelerator_count, allow_unknown))
    out.update(_reduction_servers(opt, replica_count, accelerator_type, allow_unknown))
    for note in sorted(
        {
            vertex_machines.image_note(a)
            for a in (accelerator_type, out.get("chief_accelerator_type"))
        }
        - {None}
    ):
        log.warning("%s", note)
    return out


def _scheduling(opt: Opt) -> dict[str, Any]:
    """--scheduling-strategy, --max-wait-duration, --timeout and --persistent-resource-id."""
    out: dict[str, Any] = {}
    strategy = opt("scheduling_strategy")
    if strategy:
        strategy = strategy.upper()
        if strategy not in SCHEDULING_STRATEGIES:
            raise UserInputError(
                "--scheduling-strategy",
                f"expected one of {', '.join(SCHEDULING_STRATEGIES)}, "
                f"got {opt('scheduling_strategy')!r}",
            )
        out["scheduling_strategy"] = strategy
    out["max_wait_duration"] = duration_seconds(
        "--max-wait-duration", opt("max_wait_duration"), allow_zero=True
    )
    out["timeout"] = duration_seconds("--timeout", opt("timeout"))
    resource = opt("persistent_resource_id")
    if resource:
        if not re.fullmatch(r"[a-z][a-z0-9-]{0,62}", resource):
            raise UserInputError(
                "--persistent-resource-id",
                f"expected the resource's id (lowercase letters, digits, "
                f"'-'), not its full name, got {resource!r}",
            )
        if strategy in ("SPOT", "FLEX_START"):
            raise UserInputError(
                "--persistent-resource-id",
                f"the job runs on the persistent resource's machines: "
                f"--scheduling-strategy {strategy} does not apply",
            )
        out["persistent_resource_id"] = resource
    return out


def _network_and_key(opt: Opt) -> dict[str, Any]:
    """--network, --reserved-ip-range, --label and --encryption-spec-key-name."""
    network = opt("network")
    if network and not re.fullmatch(r"projects/[^/]+/global/networks/[^/]+", network):
        raise UserInputError(
            "--network", f"expected projects/PROJECT_NUMBER/global/networks/NAME, got {network!r}"
        )
    ranges = tuple(opt("reserved_ip_range") or ())
    if ranges and not network:
        raise UserInputError(
            "--reserved-ip-range", "needs --network (the ranges are reserved in that VPC network)"
        )
    out: dict[str, Any] = {
        "network": network,
        "reserved_ip_ranges": ranges,
        "labels": _labels(opt("label")),
    }
    key = opt("encryption_spec_key_name")
    if key:
        match = re.fullmatch(
            r"projects/[^/]+/locations/([^/]+)/keyRings/[^/]+/cryptoKeys/[^/]+", key
        )
        if not match:
            raise UserInputError(
                "--encryption-spec-key-name",
                f"expected projects/P/locations/L/keyRings/R/cryptoKeys/K, got {key!r}",
            )
        if opt("region") and match.group(1) != opt("region"):
            raise UserInputError(
                "--encryption-spec-key-name",
                f"the key is in {match.group(1)}, the job in "
                f"{opt('region')}: Vertex AI needs a key in its region",
            )
        out["encryption_spec_key_name"] = key
    return out


def _chief_pool(
    opt: Opt,
    machine_type: str,
    accelerator_type: str | None,
    accelerator_count: int,
    allow_unknown: bool,
) -> dict[str, Any]:
    """Worker pool 0's own machine and accelerators (--chief-*), when they differ from the
    workers'."""
    chief_type = opt("chief_machine_type")
    chief_count_given = count(
        "--chief-accelerator-count", opt("chief_accelerator_count"), 0, MAX_ACCELERATORS
    )
    if not (chief_type or opt("chief_accelerator_type") or chief_count_given):
        return {}
    chief_accelerator = opt("chief_accelerator_type") or accelerator_type
    if chief_accelerator and chief_accelerator.lower() == "none":
        chief_accelerator = None
    chief_count = (chief_count_given or accelerator_count or 1) if chief_accelerator else 0
    chief_type = chief_type or machine_type
    vertex_machines.check_machine(
        chief_type,
        chief_accelerator,
        chief_count,
        flag="--chief-machine-type",
        allow_unknown=allow_unknown,
    )
    return {
        "chief_machine_type": chief_type,
        "chief_accelerator_type": chief_accelerator,
        "chief_accelerator_count": chief_count,
    }


def _reduction_servers(
    opt: Opt, replica_count: int, accelerator_type: str | None, allow_unknown: bool
) -> dict[str, Any]:
    """Worker pool 2's Reduction Server (--reduction-server-*)."""
    servers = opt("reduction_server_count")
    if not servers:
        if opt("reduction_server_machine_type") or opt("reduction_server_image"):
            raise UserInputError(
                "--reduction-server-count", "required with --reduction-server-machine-type/-image"
            )
        return {}
    servers = count("--reduction-server-count", servers, 1, MAX_REPLICAS)
    if replica_count < 2 or not accelerator_type:
        raise UserInputError(
            "--reduction-server-count",
            "Reduction Server speeds up all-reduce between GPU "
            "workers (NCCL): it needs --replica-count >= 2 and "
            "--accelerator-type",
        )
    server_type = opt("reduction_server_machine_type") or DEFAULT_REDUCTION_SERVER_MACHINE_TYPE
    vertex_machines.check_machine(
        server_type, None, 0, flag="--reduction-server-machine-type", allow_unknown=allow_unknown
    )
    return {
        "reduction_server_count": servers,
        "reduction_server_machine_type": server_type,
        "reduction_server_image": opt("reduction_server_image") or REDUCTION_SERVER_IMAGE,
    }
