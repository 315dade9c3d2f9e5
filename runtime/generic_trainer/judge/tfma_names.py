"""TFMA's config message names on the `tensorflow_model_analysis` module, for TFX's files.

TFX's module files (e.g. components/testdata/module_file/evaluator_module.py) annotate with
`tfma.EvalConfig`; TFMA 0.52 keeps the messages only in
`tensorflow_model_analysis.proto.config_pb2`.
`install()` sets the missing names to those very messages (nothing else of TFMA changes).
"""

from __future__ import annotations


def install() -> list[str]:
    """Set every config_pb2 message TFMA does not export itself; returns their names."""
    import tensorflow_model_analysis as tfma
    from tensorflow_model_analysis.proto import config_pb2

    added = []
    for name in config_pb2.DESCRIPTOR.message_types_by_name:
        if not hasattr(tfma, name):
            setattr(tfma, name, getattr(config_pb2, name))
            added.append(name)
    return added
