"""A compact declaration of a `.proto` file, built into the descriptor pool and message classes.

Each `*_pb2` module beside this one declares one of TFX 1.21's `tfx/proto/*.proto` files as a
`ProtoFile`: its file and package names, its messages (one string a field, in `.proto` order)
and its top-level enums. `ProtoFile.descriptor()` turns that into the `FileDescriptorProto` protoc
would have written for the `.proto` file, so `build()` registers in protobuf's default pool the very
descriptor TFX's generated module registers: the messages are the same on the wire, in JSON and in
text format, and a real TFX loaded in the same process adds an identical file, which protobuf
accepts. Where the real `tfx` package is installed, `build()` returns its module's names instead.

Field lines: `[repeated] TYPE NAME = NUMBER`, `map<KEY, VALUE> NAME = NUMBER`,
`oneof ONEOF TYPE NAME = NUMBER`, and `reserved 1, 3, 5 to 7`. TYPE is a scalar type, a message
or enum of the file (found from the innermost enclosing message outwards, as protoc does) or a
fully qualified name of a dependency (`google.protobuf.Any`). A nested message is a dict
`{name: [lines]}` among the lines. Enum lines: `NAME = NUMBER` and `reserved 1 to 4, 6, 9 to max`.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.machinery
import logging
import os
import sys
from typing import Any

log = logging.getLogger(__name__)
Lines = list[str | dict[str, "Lines"]]

_SCALARS = (
    "double float int64 uint64 int32 fixed64 fixed32 bool string bytes uint32 sfixed32 sfixed64 "
    "sint32 sint64"
).split()
_ENUM_MAX = 2**31 - 1
DECLARED: dict[str, ProtoFile] = {}  # file name -> its declaration, for every file built


@dataclasses.dataclass(frozen=True)
class ProtoFile:
    """One `.proto` file, declared.

    Attributes:
      name: the file name protoc records (`tfx/proto/trainer.proto`).
      package: the proto package (`tfx.components.trainer`).
      messages: top-level message name -> its lines (see the module doc).
      enums: top-level enum name -> its lines.
      dependencies: imported file name -> the Python module that registers it.
    """

    name: str
    package: str
    messages: dict[str, Lines]
    enums: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    dependencies: dict[str, str] = dataclasses.field(default_factory=dict)

    def descriptor(self) -> Any:
        """The `FileDescriptorProto` protoc writes for this file (no options, no source info)."""
        from google.protobuf import descriptor_pb2

        proto = descriptor_pb2.FileDescriptorProto(
            name=self.name, package=self.package, syntax="proto3"
        )
        proto.dependency.extend(self.dependencies)
        local = _local_types(self.package, self.messages, self.enums)
        for name, lines in self.messages.items():
            _message(proto.message_type.add(), name, lines, f"{self.package}.{name}", local)
        for name, lines in self.enums.items():
            _enum(proto.enum_type.add(), name, lines)
        return proto


def _local_types(scope: str, messages: dict[str, Lines], enums: dict[str, Any]) -> dict[str, bool]:
    """Every message and enum full name declared under `scope` -> whether it is an enum."""
    found = {f"{scope}.{name}": True for name in enums}
    for name, lines in messages.items():
        found[f"{scope}.{name}"] = False
        for line in lines:
            if isinstance(line, dict):
                found.update(_local_types(f"{scope}.{name}", line, {}))
    return found


def _message(proto: Any, name: str, lines: Lines, full_name: str, local: dict[str, bool]) -> None:
    proto.name = name
    oneofs: list[str] = []
    for line in lines:
        if isinstance(line, dict):
            for nested, nested_lines in line.items():
                child = proto.nested_type.add()
                _message(child, nested, nested_lines, f"{full_name}.{nested}", local)
        elif line.startswith("reserved "):
            for start, end in _ranges(line):
                proto.reserved_range.add(start=start, end=end + 1)
        else:
            _field(proto, line, full_name, local, oneofs)
    for oneof in oneofs:
        proto.oneof_decl.add(name=oneof)


def _field(proto: Any, line: str, scope: str, local: dict[str, bool], oneofs: list[str]) -> None:
    """Add the field `line` declares to the message `proto` (a map adds its entry type too)."""
    words = line.replace(", ", ",").split()
    if words[-2] != "=" or len(words) not in (4, 5, 6):
        raise ValueError(f"{scope}: cannot read the field line {line!r}")
    field = proto.field.add(name=words[-3], number=int(words[-1]), label="LABEL_OPTIONAL")
    kind = words[-4]
    if words[0] == "repeated":
        field.label = field.LABEL_REPEATED
    elif words[0] == "oneof":
        if words[1] not in oneofs:
            oneofs.append(words[1])
        field.oneof_index = oneofs.index(words[1])
    if kind.startswith("map<"):
        key, value = kind[4:-1].split(",")
        entry = proto.nested_type.add(name=_camel(field.name) + "Entry")
        entry.options.map_entry = True
        _field(entry, f"{key} key = 1", scope, local, oneofs)
        _field(entry, f"{value} value = 2", scope, local, oneofs)
        field.label = field.LABEL_REPEATED
        field.type, field.type_name = field.TYPE_MESSAGE, f".{scope}.{entry.name}"
        return
    _set_type(field, kind, scope, local)


def _set_type(field: Any, kind: str, scope: str, local: dict[str, bool]) -> None:
    """Set the field's type (and type name) as protoc resolves `kind` from within `scope`."""
    if kind in _SCALARS:
        field.type = field.Type.Value(f"TYPE_{kind.upper()}")
        return
    while scope and f"{scope}.{kind}" not in local:
        scope = scope.rpartition(".")[0]
    full_name = f"{scope}.{kind}" if scope else kind
    if not scope and "." not in kind:
        raise ValueError(f"field {field.name}: no type {kind!r} in the file")
    field.type_name = "." + full_name
    field.type = field.TYPE_ENUM if local.get(full_name) else field.TYPE_MESSAGE


def _enum(proto: Any, name: str, lines: list[str]) -> None:
    proto.name = name
    for line in lines:
        if line.startswith("reserved "):
            for start, end in _ranges(line):
                proto.reserved_range.add(start=start, end=end)  # an enum's end is inclusive
        else:
            value, _, number = line.partition(" = ")
            proto.value.add(name=value, number=int(number))


def _ranges(line: str) -> list[tuple[int, int]]:
    """`reserved 1, 3 to 5, 9 to max` -> [(1, 1), (3, 5), (9, 2**31 - 1)] (inclusive ends)."""
    ranges = []
    for part in line.removeprefix("reserved ").split(","):
        start, _, end = part.strip().partition(" to ")
        ranges.append((int(start), _ENUM_MAX if end == "max" else int(end or start)))
    return ranges


def _camel(name: str) -> str:
    """protoc's map entry name: `pod_labels` -> `PodLabels`."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def real_tfx_module(module: str) -> Any | None:
    """The real `tfx.proto.<module>` when the `tfx` package is installed and has it, else None
    (also where `tfx` is `tfx_hook`'s stand-in, or the real module fails to import)."""
    spec = importlib.machinery.PathFinder.find_spec("tfx")
    if spec is None or not spec.submodule_search_locations:
        return None
    if getattr(sys.modules.get("tfx"), "__generic_trainer_stand_in__", False):  # tfx_hook's mark
        return None
    if not any(
        os.path.isfile(os.path.join(folder, "proto", f"{module}.py"))
        for folder in spec.submodule_search_locations
    ):
        return None
    try:
        return importlib.import_module(f"tfx.proto.{module}")
    except ImportError as error:
        log.warning(
            "the installed tfx.proto.%s does not import (%s): declaring it here", module, error
        )
        return None


def build(proto_file: ProtoFile, module_name: str) -> dict[str, Any]:
    """The names a generated `*_pb2` module defines for `proto_file`.

    Args:
      proto_file: the declared file.
      module_name: the module that will hold the names (set as the classes' `__module__`).

    Returns:
      `DESCRIPTOR`, a class per top-level message (nested ones are its attributes), an
      `EnumTypeWrapper` per top-level enum and each enum value as an int, as protoc's module has;
      the real TFX module's public names where TFX is installed.
    """
    DECLARED[proto_file.name] = proto_file
    stem = proto_file.name.rpartition("/")[2].removesuffix(".proto") + "_pb2"
    real = real_tfx_module(stem)
    if real is not None:
        return {key: value for key, value in vars(real).items() if not key.startswith("_")}
    from google.protobuf import descriptor_pool
    from google.protobuf.internal import builder  # what protoc's generated modules call

    for dependency in proto_file.dependencies.values():
        importlib.import_module(dependency)
    pool = descriptor_pool.Default()
    try:
        file = pool.FindFileByName(proto_file.name)
    except KeyError:
        file = pool.AddSerializedFile(proto_file.descriptor().SerializeToString())
    names: dict[str, Any] = {"DESCRIPTOR": file}
    builder.BuildMessageAndEnumDescriptors(file, names)
    builder.BuildTopDescriptorsAndMessages(file, module_name, names)
    return names
