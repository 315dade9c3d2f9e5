"""TFX's Examples artifact properties, kept with the examples:
`<examples>/examples_properties.json`.

TFX records `payload_format` (FORMAT_TF_EXAMPLE or FORMAT_TF_SEQUENCE_EXAMPLE), `file_format`,
`span`, `version` (when the input patterns have a `{VERSION}`) and `input_fingerprint` on the
Examples artifact in ML Metadata. Here import-examples writes them into the KFP executor output
and into this file, so the verbs downstream (transform, train, tune) know what the records hold
without KFP: `payload_format(examples_dir)` reads it. An Examples folder without the file (TFX's
own testdata, another tool's output) is read by its first record: a record that is not a
tf.Example but parses as a tf.SequenceExample says FORMAT_TF_SEQUENCE_EXAMPLE.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from generic_trainer.errors import UserInputError
from generic_trainer.records import example_protos
from generic_trainer.records.example_protos import (
    FORMAT_TF_EXAMPLE,
    FORMAT_TF_SEQUENCE_EXAMPLE,
    PAYLOAD_FORMATS,
)

PROPERTIES_FILE = "examples_properties.json"
FILE_FORMAT = "tfrecords_gzip"  # TFX's file_format of ExampleGen's output
_MAX_BYTES = 1 << 20


def properties(
    payload_format: str, span: int, version: int | None, fingerprint: str
) -> dict[str, Any]:
    """The properties TFX's ExampleGen records on its Examples artifact."""
    out: dict[str, Any] = {
        "payload_format": payload_format,
        "file_format": FILE_FORMAT,
        "span": span,
        "input_fingerprint": fingerprint,
    }
    if version is not None:
        out["version"] = version
    return out


def write(
    examples_dir: str, props: Mapping[str, Any], write_text: Callable[[str, str], None]
) -> None:
    """Write the properties file into an Examples folder (staged with it)."""
    sep = "/" if "://" in examples_dir else os.sep
    write_text(examples_dir.rstrip("/") + sep + PROPERTIES_FILE, json.dumps(dict(props), indent=1))


def read(examples_dir: str, input_name: str = "--examples") -> dict[str, Any] | None:
    """The properties of an Examples folder, or None when it has no properties file."""
    from generic_trainer.artifacts import bounded_parse

    path = os.path.join(examples_dir, PROPERTIES_FILE)
    if not os.path.isfile(path):
        return None
    text = bounded_parse.read_text(path, input_name, _MAX_BYTES)
    props = bounded_parse.load_json(text, input_name, f"{path}: ")
    if not isinstance(props, dict):
        raise UserInputError(input_name, f"{path}: expected a JSON object of properties")
    if props.get("payload_format", FORMAT_TF_EXAMPLE) not in PAYLOAD_FORMATS:
        raise UserInputError(
            input_name,
            f"{path}: payload_format {props.get('payload_format')!r} is not one of "
            f"{', '.join(PAYLOAD_FORMATS)}",
        )
    return props


def payload_format(examples_dir: str, input_name: str = "--examples") -> str:
    """FORMAT_TF_EXAMPLE or FORMAT_TF_SEQUENCE_EXAMPLE: the properties file's, else the first
    record's (see the module doc)."""
    props = read(examples_dir, input_name)
    if props is not None:
        return props.get("payload_format", FORMAT_TF_EXAMPLE)
    record = _first_record(examples_dir)
    return FORMAT_TF_EXAMPLE if record is None else sniff(record)


def payload_format_of(patterns: list[str], input_name: str = "--examples") -> str:
    """The payload format of the records split file patterns (`<dir>/Split-x/*`) match: the
    properties file of their Examples folder, else the first record of the first file."""
    import glob

    if not patterns or "://" in patterns[0]:
        return FORMAT_TF_EXAMPLE
    props = read(os.path.dirname(os.path.dirname(patterns[0])), input_name)
    if props is not None:
        return props.get("payload_format", FORMAT_TF_EXAMPLE)
    for path in sorted(p for pattern in patterns for p in glob.glob(pattern)):
        record = _record_of(path)
        if record is not None:
            return sniff(record)
    return FORMAT_TF_EXAMPLE


def _record_of(path: str) -> bytes | None:
    """The first record of a regular file, or None (empty, unreadable or damaged: the record
    checks name damage)."""
    from generic_trainer.records.example_files import read_records

    if not os.path.isfile(path):
        return None
    try:
        return next(read_records(path, 1), None)
    except (OSError, EOFError, ValueError, zlib.error):
        return None


def sniff(record: bytes) -> str:
    """The payload format one serialized record has (a tf.Example unless it is a
    SequenceExample)."""
    try:
        example_protos.canonical(record, "", FORMAT_TF_EXAMPLE)
        return FORMAT_TF_EXAMPLE
    except ValueError:
        pass
    try:
        example_protos.canonical(record, "", FORMAT_TF_SEQUENCE_EXAMPLE)
    except ValueError:
        return FORMAT_TF_EXAMPLE  # neither: the record checks name it
    return FORMAT_TF_SEQUENCE_EXAMPLE


def _first_record(examples_dir: str) -> bytes | None:
    if not os.path.isdir(examples_dir):
        return None
    for entry in sorted(os.scandir(examples_dir), key=lambda e: e.name):
        if not entry.is_dir():
            continue
        for name in sorted(os.listdir(entry.path)):
            record = None if name.startswith(".") else _record_of(os.path.join(entry.path, name))
            if record is not None:
                return record
    return None
