"""What is wrong with a record that does not decode, in words (for record_checks.py).

A record is decoded as a tf.Example, or by the schema's batch parser (record_parsing.py);
TensorFlow's parse errors are read into `feature 'x': what is wrong` where their text allows.
"""

from __future__ import annotations

import re

from generic_trainer.records.record_parsing import Parse

NOT_AN_EXAMPLE = "it is not a serialized tf.Example"
_DECODE_PATTERNS = (
    re.compile(
        r"Feature: (?P<feature>\S+) \(data type: (?P<dtype>\w+)\) is required but could not be "
        r"found"
    ),
    re.compile(r"Key: (?P<feature>[^,\s]+), Index: \d+\.\s+(?P<detail>[^\[]*?)\s*(\[|$)"),
    re.compile(r"(?P<detail>Could not parse example input)"),
)


def record_problem(record: bytes, spec: Parse | None) -> str | None:
    """Why `record` does not decode (as a tf.Example, by the schema's parser when given).

    Args:
      record: a serialized record.
      spec: the schema's batch parser (None: decoded as a tf.Example).

    Returns:
      What is wrong, or None when it decodes.
    """
    import tensorflow as tf
    from google.protobuf.message import DecodeError

    if spec is None:
        try:
            tf.train.Example.FromString(record)
        except DecodeError:
            return NOT_AN_EXAMPLE
        return None
    try:
        spec(tf.constant([record]))
    except tf.errors.InvalidArgumentError as e:
        return describe_decode_error(e.message) or " ".join(e.message.split())[:300]
    except UnicodeDecodeError:  # TensorFlow's error text quoted record bytes that are not UTF-8
        return NOT_AN_EXAMPLE
    return None


def describe_decode_error(message: str) -> str | None:
    """`feature 'x': <what TensorFlow said>` for a tf.io.parse_example error (None: another error).

    Args:
      message: TensorFlow's error message.

    Returns:
      The problem in words, or None.
    """
    for pattern in _DECODE_PATTERNS:
        match = pattern.search(message)
        if match:
            groups = match.groupdict()
            if groups.get("dtype"):
                return (
                    f"feature {groups['feature']!r} ({groups['dtype']}) is required by the "
                    "schema but missing"
                )
            detail = " ".join((groups.get("detail") or "").split()).rstrip(".")
            if detail.startswith("Could not parse"):
                return NOT_AN_EXAMPLE
            return f"feature {groups['feature']!r}: {detail}"
    return None


def batch_problem(records: list[bytes], spec: Parse) -> str | None:
    """TensorFlow's error decoding a batch of records with `spec` (None: they all decode)."""
    import tensorflow as tf

    try:
        spec(tf.constant(records))
    except tf.errors.InvalidArgumentError as e:
        return e.message
    except UnicodeDecodeError:  # an error text quoting non-UTF-8 bytes: some record is no Example
        return NOT_AN_EXAMPLE
    return None
