"""The penguin Task on Keras 3 with two real worker processes (MultiWorkerMirroredStrategy on
127.0.0.1).

The metrics the two-worker run reports are global: AUC, accuracy, macro F1 (host-side, from
`aggregate_logs`) and loss over the whole eval set equal a single-process evaluation of the
exported model on the same examples.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import PENGUIN, cli_env, free_port
from generic_trainer.fit import user_module
from generic_trainer.records.example_files import split_file_patterns

pytestmark = pytest.mark.slow


def _start_workers(tmp_path, extra_args: list[str]) -> list[tuple[subprocess.Popen, object]]:
    ports = [free_port(), free_port()]
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    for index in range(2):
        tmpdir = tmp_path / f"tmp{index}"
        tmpdir.mkdir()
        env = cli_env(
            {
                "TF_CONFIG": json.dumps(
                    {"cluster": cluster, "task": {"type": "worker", "index": index}}
                ),
                "TMPDIR": str(tmpdir),
            }
        )
        log = open(tmp_path / f"worker{index}.log", "w+")  # noqa: SIM115 - closed below
        procs.append(
            (
                subprocess.Popen(
                    [sys.executable, "-m", "generic_trainer", *extra_args],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    text=True,
                ),
                log,
            )
        )
    return procs


def _wait(procs, timeout: float) -> list[str]:
    outputs = []
    try:
        for proc, _ in procs:
            proc.wait(timeout=timeout)
    finally:
        for proc, log in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.seek(0)
            outputs.append(log.read())
            log.close()
    return outputs


def _validation_line(output: str) -> str:
    lines = re.findall(
        r"validation at step \d+: \d+ batches, (\d+ examples), [\d.]+ s: (.*)", output
    )
    assert lines, output[-3000:]
    return " ".join(lines[-1])


def test_two_workers_train_the_penguin_task_with_global_metrics(tmp_path):
    import keras
    import tensorflow as tf

    assert keras.__version__.startswith("3.")
    model_dir, metrics_file = tmp_path / "model", tmp_path / "metrics.json"
    args = [
        "train",
        "--task",
        f"{PENGUIN / 'task.py'}:PenguinTask",
        "--experiment",
        "penguin",
        "--examples",
        str(PENGUIN / "data"),
        "--schema",
        str(PENGUIN / "schema.pbtxt"),
        "--model-dir",
        str(model_dir),
        "--metrics-file",
        str(metrics_file),
        "--cluster-timeout",
        "120",
        "--params-override",
        "trainer.train_steps=20,trainer.steps_per_loop=10,trainer.validation_interval=20,"
        "trainer.checkpoint_interval=20,task.validation_data.global_batch_size=16",
    ]
    chief_out, worker_out = _wait(_start_workers(tmp_path, args), timeout=420)
    assert "strategy=CollectiveAllReduceStrategy replicas_in_sync=2" in chief_out, chief_out[-3000:]
    assert re.search(r"step 20/20 .* loss=", chief_out), chief_out[-3000:]
    assert "worker worker:1 done; the chief publishes the outputs" in worker_out, worker_out[-3000:]
    # both workers computed the same global validation metrics, over all 95 examples
    assert _validation_line(chief_out) == _validation_line(worker_out)
    n_examples = int(_validation_line(chief_out).split()[0])

    # only the chief published; the workers' private dirs are gone
    assert sorted(os.listdir(model_dir)) == [
        "Format-Serving",
        "logs",
        "schemata",
    ]  # schemata: Vertex predictSchemata
    assert (model_dir / "logs" / "checkpoints" / "params.yaml").is_file()
    assert (model_dir / "logs" / "checkpoints" / "best_ckpt" / "info.json").is_file()
    assert os.listdir(tmp_path / "tmp0") == [] and os.listdir(tmp_path / "tmp1") == []
    reported = json.loads(metrics_file.read_text())

    # single-process evaluation of the exported model on the same data
    serve = tf.saved_model.load(str(model_dir / "Format-Serving")).signatures["serving_default"]
    files = tf.io.gfile.glob(split_file_patterns(str(PENGUIN / "data"), ["eval"])[0])
    serialized = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]
    labels = np.array(
        [
            tf.train.Example.FromString(s).features.feature["species"].int64_list.value[0]
            for s in serialized
        ]
    )
    probabilities = serve(examples=tf.constant(serialized))["outputs"].numpy()
    assert len(serialized) == n_examples
    auc = keras.metrics.AUC()
    auc.update_state(tf.one_hot(labels, 3), probabilities)
    accuracy = float(np.mean(probabilities.argmax(-1) == labels))
    penguin_task = user_module.import_module(str(PENGUIN / "task.py"), str(PENGUIN / "task.py"))
    macro_f1 = penguin_task.macro_f1(labels, probabilities.argmax(-1), 3)
    loss = float(np.mean(-np.log(probabilities[np.arange(len(labels)), labels])))

    assert reported["accuracy"] == pytest.approx(accuracy, abs=1e-6)
    assert reported["auc"] == pytest.approx(float(auc.result()), abs=1e-5)
    assert reported["macro_f1"] == pytest.approx(macro_f1, abs=1e-9)
    assert reported["loss"] == pytest.approx(loss, rel=1e-4)
