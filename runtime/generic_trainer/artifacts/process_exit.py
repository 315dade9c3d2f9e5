"""Ending the `generic-trainer` process once a verb is done, without Python's slow teardown.

After a training run the interpreter's own teardown (module finalization, then destroying every
TensorFlow object still alive) takes seconds: Keras' epoch iterators are left in reference cycles,
and destroying the tf.data iterators they hold waits for tf.data's autotuning thread to wake, up to
its optimization period (seen: 5-10 s on a busy machine). By then every output is written, so the
process ends with `os._exit` instead, after doing what the teardown would have done that can matter:

1. flush what still buffers data in memory: TensorFlow summary writers and TFRecord writers that a
   module left open, and open Python files;
2. run the `atexit` handlers (user code's, `logging.shutdown`, `weakref.finalize`,
multiprocessing's);
3. flush stdout and stderr.

Python does not promise `__del__` methods of objects alive at exit are called, so nothing a program
may rely on is skipped. Only the console script ends this way; `cli.main(argv)` called in-process
(tests, notebooks) returns normally. Replicas of a cluster (TF_CONFIG, CLUSTER_SPEC, a distributed
keras-tuner search) keep the normal teardown: there TensorFlow's coordination service and the
tuner's oracle say goodbye to the other replicas while objects are destroyed
(`safe_to_skip_teardown`).
"""

from __future__ import annotations

import atexit
import gc
import io
import logging
import os
import sys
from collections.abc import Mapping

log = logging.getLogger(__name__)
_IO_BASE = io.IOBase.__mro__[
    1
]  # `_io._IOBase`: every file object's C base (io.IOBase is an ABC over it)


def _writer_types() -> tuple[type, ...]:
    """TensorFlow's buffering writers, when TensorFlow is loaded (never imported here)."""
    if "tensorflow" not in sys.modules:
        return ()
    try:
        from tensorflow.python.lib.io import tf_record
        from tensorflow.python.ops import summary_ops_v2
    except ImportError:  # a TensorFlow without these: nothing of it to flush
        return ()
    return summary_ops_v2.SummaryWriter, tf_record.TFRecordWriter


def flush_open_writers() -> int:
    """Flush every live TensorFlow summary writer, TFRecord writer and open writable Python file
    (what garbage collection at exit would flush); returns how many were flushed."""
    tf_writers = _writer_types()
    kinds: dict[type, str | None] = {}  # decided once per type
    flushed = 0
    for obj in gc.get_objects():
        cls = type(obj)
        kind = kinds.get(cls, "")
        if kind == "":
            mro = getattr(
                cls, "__mro__", ()
            )  # not issubclass: ABC checks over ~10^4 types take seconds
            kind = kinds[cls] = (
                "tf" if any(t in mro for t in tf_writers) else "file" if _IO_BASE in mro else None
            )
        if kind is None:
            continue
        try:
            if kind == "tf":
                if not getattr(obj, "_closed", False):
                    obj.flush()
                    flushed += 1
            elif not obj.closed and obj.writable():
                obj.flush()
                flushed += 1
        except Exception as e:  # one broken writer must not stop the others (nor the exit)
            log.debug("could not flush %r at exit: %s", obj, e)
    return flushed


def safe_to_skip_teardown(in_cluster: bool, environ: Mapping[str, str]) -> bool:
    """False for a replica of a cluster (`in_cluster`, which the face reads with cluster.configured)
    or of a distributed keras-tuner search (keras-tuner's KERASTUNER_ORACLE_IP): other processes may
    wait on what its teardown does. `environ`: the process's, read by the face."""
    return not (in_cluster or environ.get("KERASTUNER_ORACLE_IP", "").strip())


def end(code: int) -> None:
    """Flush what is buffered, run the atexit handlers, flush stdout/stderr, and
    `os._exit(code)`."""
    flush_open_writers()
    atexit._run_exitfuncs()  # logging.shutdown among them: every handler flushed and closed
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)
