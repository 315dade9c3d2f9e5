"""A TFX node's argument values as the JSON values of this image's component parameters.

Proto messages (`tfx.proto.*`, `tfma.EvalConfig`) become JSON objects through protobuf's
`json_format` (TFX's field names, as TFX's `proto_utils.proto_to_json`); a `RuntimeParameter`
becomes a `ParameterRef`; anything else that is not plain JSON is refused naming the argument.
"""

from __future__ import annotations

import json
import os
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.tfx_dsl.dsl import RuntimeParameter
from generic_trainer.tfx_dsl.nodes import Placeholder, Predicate
from generic_trainer.tfx_dsl.steps import ParameterRef, PipelineParameter

_PTYPES = {str: "str", int: "int", float: "float"}


def is_message(value: Any) -> bool:
    """Whether `value` is a protobuf message."""
    return hasattr(value, "DESCRIPTOR") and hasattr(value, "ListFields")


def message_dict(message: Any) -> dict[str, Any]:
    """A protobuf message as a JSON object with the proto's field names."""
    from google.protobuf import json_format

    return json_format.MessageToDict(message, preserving_proto_field_name=True)


class Values:
    """Converts one pipeline's argument values, collecting its pipeline parameters."""

    def __init__(self) -> None:
        self.parameters: dict[str, PipelineParameter] = {}

    def json(self, value: Any, where: str) -> Any:
        """`value` as a JSON value (dicts for messages) or a ParameterRef.

        Args:
          value: the argument as the pipeline file gave it.
          where: `node_id.argument`, named in errors.

        Returns:
          A JSON-able value or a ParameterRef.
        """
        if isinstance(value, RuntimeParameter):
            return self._parameter(value, where)
        if is_message(value):
            return message_dict(value)
        if isinstance(value, Placeholder | Predicate):
            raise UserInputError(
                where,
                f"a placeholder ({value!r}) as an argument is not supported on this image: "
                "only Cond(...) takes placeholders here; give the value itself",
            )
        if isinstance(value, dict):
            return {str(k): self.json(v, f"{where}.{k}") for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.json(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if value is None or isinstance(value, str | int | float | bool):
            return value
        raise UserInputError(
            where, f"{type(value).__name__} value {value!r} cannot be passed to this image's step"
        )

    def message(self, value: Any, where: str) -> Any:
        """A proto argument as a JSON object; a RuntimeParameter holding its JSON text stays a
        ParameterRef; a dict is taken as the message's JSON already."""
        converted = self.json(value, where)
        if isinstance(converted, dict | ParameterRef):
            return converted
        if isinstance(converted, str):
            try:
                parsed = json.loads(converted)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                return parsed
        raise UserInputError(where, f"expected a proto message, got {value!r}")

    def text(self, value: Any, where: str) -> Any:
        """A proto argument as the JSON text a STRING parameter takes."""
        converted = self.message(value, where)
        return converted if isinstance(converted, ParameterRef) else json.dumps(converted)

    def _parameter(self, parameter: RuntimeParameter, where: str) -> ParameterRef:
        if parameter.ptype not in _PTYPES:
            raise UserInputError(
                where,
                f"RuntimeParameter {parameter.name!r}: ptype {parameter.ptype!r} is not "
                "supported; use str, int or float",
            )
        declared = PipelineParameter(parameter.name, _PTYPES[parameter.ptype], parameter.default)
        known = self.parameters.setdefault(parameter.name, declared)
        if known != declared:
            raise UserInputError(
                where, f"RuntimeParameter {parameter.name!r} is declared twice, differently"
            )
        return ParameterRef(parameter.name)


def local_path(value: Any) -> Any:
    """A local path made absolute (TFX reads relative paths from the directory the pipeline file
    ran in; a step runs elsewhere); URIs (gs://...) and ParameterRefs stay as they are."""
    if not isinstance(value, str) or not value or "://" in value:
        return value
    return os.path.abspath(value)


def split_dotted(function_path: str, where: str) -> tuple[str, str]:
    """`'models.preprocessing.preprocessing_fn'` -> (`'models.preprocessing'`,
    `'preprocessing_fn'`): TFX's `preprocessing_fn=` / `run_fn=` given as a dotted path."""
    module, _, name = function_path.rpartition(".")
    if not module or not name:
        raise UserInputError(
            where, f"{function_path!r} is not a dotted path to a function (module.function)"
        )
    return module, name


def refuse(node: Any, argument: str, why: str) -> UserInputError:
    """The error refusing `node`'s `argument` (named `node_id.argument`)."""
    return UserInputError(f"{node.id}.{argument}", why)


def reject(node: Any, props: dict[str, Any], names: dict[str, str]) -> None:
    """Refuse the given arguments in `names` (argument -> why)."""
    for name, why in names.items():
        if props.get(name) not in (None, False, {}, [], ""):
            raise refuse(node, name, why)
