"""`make demo`: train the bundled penguin example end to end with the real CLI, then serve it.

Runs `generic-trainer train` on examples/penguin (TFX Examples layout, schema, module.py),
loads the published serving model, sends it the eval split as serialized tf.Example through
`serving_default`, and prints the eval accuracy and where the model is.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def serve_accuracy(
    serving_dir: str, eval_pattern: str, label_key: str = "species"
) -> tuple[float, int]:
    """Accuracy of the serving model on serialized eval examples, as a serving client would see
    it."""
    import tensorflow as tf

    model = tf.saved_model.load(serving_dir)
    serve = model.signatures["serving_default"]
    input_name = next(iter(serve.structured_input_signature[1]))
    records = list(
        tf.data.TFRecordDataset(
            glob.glob(eval_pattern), compression_type="GZIP"
        ).as_numpy_iterator()
    )
    labels = [
        tf.train.Example.FromString(r).features.feature[label_key].int64_list.value[0]
        for r in records
    ]
    outputs = serve(**{input_name: tf.constant(records)})
    probs = next(iter(outputs.values())).numpy()
    correct = sum(int(p.argmax() == y) for p, y in zip(probs, labels, strict=True))
    return correct / len(labels), len(labels)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="out/demo", help="output directory (model, logs, metrics)")
    parser.add_argument("--train-steps", default="500")
    args = parser.parse_args()
    out = os.path.abspath(args.out)
    model_dir = os.path.join(out, "model")
    cmd = [
        os.path.join(os.path.dirname(sys.executable), "generic-trainer"),
        "train",
        "--examples",
        os.path.join(HERE, "data"),
        "--schema",
        os.path.join(HERE, "schema.pbtxt"),
        "--module-file",
        os.path.join(HERE, "module.py"),
        "--model-dir",
        model_dir,
        "--metrics-file",
        os.path.join(out, "metrics.json"),
        "--report-file",
        os.path.join(out, "report.html"),
        "--train-steps",
        args.train_steps,
    ]
    print("$", " ".join(cmd), flush=True)
    started = time.monotonic()
    if subprocess.call(cmd) != 0:
        print("demo: training failed (see the log above)", file=sys.stderr)
        return 1
    accuracy, n = serve_accuracy(
        os.path.join(model_dir, "Format-Serving"), os.path.join(HERE, "data/Split-eval/*")
    )
    with open(os.path.join(out, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    print(f"\ntrained in {time.monotonic() - started:.0f} s")
    print(f"eval accuracy (serving_default on {n} serialized eval examples): {accuracy:.3f}")
    print(f"eval metrics logged by the run: {json.dumps(metrics)}")
    print(f"serving model: {os.path.join(model_dir, 'Format-Serving')}")
    print(
        f"TensorBoard logs: {os.path.join(model_dir, 'logs')}   report: "
        f"{os.path.join(out, 'report.html')}"
    )
    if accuracy <= 0.9:
        print("demo: accuracy is not above 0.9", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
