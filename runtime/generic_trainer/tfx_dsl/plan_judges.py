"""The model's later steps as this image's components: InfraValidator, Pusher, BulkInferrer.

Each function reads the node's arguments and returns the step's parameters (see `plan_nodes`).
"""

from __future__ import annotations

from typing import Any

from generic_trainer.tfx_dsl.nodes import BaseNode
from generic_trainer.tfx_dsl.plan_values import Values, local_path, refuse, reject


def infra_validator(node: BaseNode, v: Values) -> dict[str, Any]:
    """InfraValidator -> infra_validator (the model is tried in this image's sandbox)."""
    props = node.exec_properties
    out: dict[str, Any] = {}
    request = (
        v.message(props["request_spec"], f"{node.id}.request_spec")
        if props.get("request_spec") is not None
        else {}
    )
    if request.get("split_name"):
        out["eval_splits"] = [request["split_name"]]
    if request.get("num_examples"):  # TFX's examples, one per request here
        out |= {"num_requests": int(request["num_examples"]), "batch_size": 1}
    if request.get("make_warmup"):  # TFX writes a warm-up request per example it sent (default 1)
        out["write_warmup"] = min(int(request.get("num_examples") or 1), 1000)
    validation = (
        v.message(props["validation_spec"], f"{node.id}.validation_spec")
        if props.get("validation_spec") is not None
        else {}
    )
    if validation.get("max_loading_time_seconds"):
        out["timeout"] = float(validation["max_loading_time_seconds"])
    return out


def pusher(node: BaseNode, v: Values) -> dict[str, Any]:
    """Pusher -> pusher (a filesystem destination)."""
    props = node.exec_properties
    reject(
        node,
        props,
        {
            "custom_config": "this image pushes to a filesystem or gs:// destination; "
            "custom_config (cloud serving) is not supported",
            "custom_executor_spec": "this image's pusher copies to push_destination only",
        },
    )
    if props.get("push_destination") is None:
        raise refuse(
            node,
            "push_destination",
            "needed: PushDestination(filesystem=PushDestination.Filesystem(base_directory=...))",
        )
    destination = v.message(props["push_destination"], f"{node.id}.push_destination")
    if not isinstance(destination, dict):
        return {"push_destination": destination}
    base = destination.get("filesystem", {}).get("base_directory")
    if not base or set(destination) != {"filesystem"}:
        raise refuse(
            node,
            "push_destination",
            f"{destination}: only a filesystem base_directory (a folder or gs:// URI) is supported",
        )
    destination["filesystem"]["base_directory"] = local_path(base)
    return {"push_destination": v.text(destination, f"{node.id}.push_destination")}


def bulk_inferrer(node: BaseNode, v: Values) -> dict[str, Any]:
    """BulkInferrer -> bulk_inferrer."""
    props = node.exec_properties
    out: dict[str, Any] = {}
    if props.get("data_spec") is not None:
        spec = v.message(props["data_spec"], f"{node.id}.data_spec")
        if spec.get("example_splits"):
            out["data_splits"] = list(spec["example_splits"])
    for name in ("model_spec", "output_example_spec"):
        if props.get(name) is not None:
            text = v.text(props[name], f"{node.id}.{name}")
            if text != "{}":
                out[name] = text
    return out
