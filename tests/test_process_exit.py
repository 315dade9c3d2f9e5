"""process_exit: the console script ends with os._exit once a verb is done, losing nothing Python's
own teardown would have written: atexit handlers run, open files, TensorFlow summary and TFRecord
writers flushed,
stdout/stderr and log handlers flushed, the exit code kept. Each case runs in a child process
that really ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import PENGUIN, run_cli

MODULES = Path(__file__).parent / "modules"


def _child(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter with block-buffered stdout (a pipe, no
    PYTHONUNBUFFERED)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_end_runs_atexit_flushes_files_logs_and_stdout_and_keeps_the_exit_code(tmp_path):
    proc = _child(
        """
        import atexit, logging, sys
        from pathlib import Path
        from generic_trainer.artifacts import process_exit
        out = Path(sys.argv[1])
        atexit.register(lambda: (out / "atexit.txt").write_text("ran"))
        left_open = open(out / "left_open.txt", "w")  # never closed: only buffered so far
        left_open.write("x" * 1000)
        binary = open(out / "left_open.bin", "wb")
        binary.write(b"y" * 1000)
        handler = logging.FileHandler(out / "run.log")
        logging.getLogger("user").addHandler(handler)
        logging.getLogger("user").warning("last log line")
        print("stdout line")  # block-buffered: stdout is a pipe
        process_exit.end(7)
        (out / "after.txt").write_text("must not run")
    """,
        tmp_path,
    )
    assert proc.returncode == 7, proc.stderr
    assert (tmp_path / "atexit.txt").read_text() == "ran"
    assert (tmp_path / "left_open.txt").read_text() == "x" * 1000
    assert (tmp_path / "left_open.bin").read_bytes() == b"y" * 1000
    assert (tmp_path / "run.log").read_text() == "last log line\n"
    assert proc.stdout == "stdout line\n"
    assert not (tmp_path / "after.txt").exists()


def test_without_end_the_same_buffers_would_be_lost_by_os_exit(tmp_path):
    """The counter-check: os._exit alone loses them, so the test above checks what `end` adds."""
    proc = _child(
        """
        import atexit, os, sys
        from pathlib import Path
        out = Path(sys.argv[1])
        atexit.register(lambda: (out / "atexit.txt").write_text("ran"))
        left_open = open(out / "left_open.txt", "w")
        left_open.write("x" * 1000)
        print("stdout line")
        os._exit(0)
    """,
        tmp_path,
    )
    assert proc.returncode == 0 and proc.stdout == ""
    assert not (tmp_path / "atexit.txt").exists() and (tmp_path / "left_open.txt").read_text() == ""


@pytest.mark.slow
def test_end_flushes_tensorflow_writers_left_open(tmp_path):
    proc = _child(
        """
        import sys
        import tensorflow as tf
        from generic_trainer.artifacts import process_exit
        out = sys.argv[1]
        writer = tf.summary.create_file_writer(out + "/board", flush_millis=10**9, max_queue=10**6)
        with writer.as_default():
            for step in range(5):
                tf.summary.scalar("left_open", float(step), step=step)
        records = tf.io.TFRecordWriter(out + "/data.tfrecord")
        for i in range(100):
            records.write(b"record %d" % i)
        process_exit.end(0)
    """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    import tensorflow as tf

    [events] = (tmp_path / "board").glob("events.out.tfevents.*")
    steps = [
        e.step
        for e in tf.compat.v1.train.summary_iterator(str(events))
        if any(v.tag == "left_open" for v in e.summary.value)
    ]
    assert steps == [0, 1, 2, 3, 4]
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(tmp_path / "data.tfrecord"))] == [
        b"record %d" % i for i in range(100)
    ]


@pytest.mark.slow
def test_train_through_the_cli_keeps_event_files_atexit_and_outputs(tmp_path):
    """A TFX-style module with its per-epoch TensorBoard callback, a tf.summary writer it never
    closes and an
    atexit handler, through `python -m generic_trainer train` (the fast end): everything is
    there."""
    model_dir = tmp_path / "model"
    proc = run_cli(
        [
            "train",
            "--examples",
            PENGUIN / "data",
            "--schema",
            PENGUIN / "schema.pbtxt",
            "--module-file",
            MODULES / "tfx_style" / "exit_checks_module.py",
            "--model-dir",
            model_dir,
            "--metrics-file",
            tmp_path / "metrics.json",
            "--train-steps",
            "4",
            "--custom-config",
            json.dumps({"atexit_file": str(tmp_path / "atexit.txt")}),
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["serving_model_dir"] == str(model_dir / "Format-Serving")
    assert (model_dir / "Format-Serving" / "saved_model.pb").is_file()
    assert json.loads((tmp_path / "metrics.json").read_text())
    assert (tmp_path / "atexit.txt").read_text() == "ran"
    import tensorflow as tf

    tags: dict[str, set[str]] = {}
    for path in (model_dir / "logs").rglob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            tags.setdefault(path.parent.name, set()).update(v.tag for v in event.summary.value)
    assert {"epoch_loss", "epoch_accuracy"} <= tags["train"] and "epoch_loss" in tags["validation"]
    assert "module_never_closed" in tags["own"]  # the module's unclosed writer, flushed at the end
    assert "loss" in tags["final"]  # the runtime's final scalars


def test_failed_run_keeps_its_exit_code(tmp_path):
    proc = run_cli(
        [
            "train",
            "--examples",
            tmp_path / "missing",
            "--module-file",
            MODULES / "speed" / "speed_module.py",
            "--model-dir",
            tmp_path / "model",
        ]
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "--examples" in proc.stderr


def test_cluster_replicas_keep_the_normal_teardown():
    from generic_trainer.artifacts import process_exit
    from generic_trainer.fit import cluster

    def safe(environ):
        return process_exit.safe_to_skip_teardown(cluster.configured(environ), environ)

    assert safe({})
    assert safe({"TF_CONFIG": " "})
    for name in ("TF_CONFIG", "CLUSTER_SPEC", "KERASTUNER_ORACLE_IP"):
        assert not safe({name: '{"cluster": {}}'})
