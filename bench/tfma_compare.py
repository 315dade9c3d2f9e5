"""generic-trainer's evaluator against TFMA itself: the same SavedModel, eval split and TFMA EvalConfig must give
the same example counts, accuracy and AUC, overall and per slice (AUC within 1e-3, the others within 1e-5).

Usage (TFMA in its own venv, since it pins its own dependencies):
    python3 -m venv /tmp/tfma && /tmp/tfma/bin/pip install tensorflow-model-analysis
    .venv/bin/python bench/tfma_compare.py --tfma-python /tmp/tfma/bin/python [--penguin-model DIR] [--work DIR]

Two cases, each evaluated three times: by TFMA (`tfma.run_model_analysis`, in the TFMA venv), by
`generic-trainer evaluate --eval-config <the same text proto>` (the translated config: Keras metrics for
BinaryAccuracy / SparseCategoricalAccuracy / AUC), and by `generic-trainer evaluate` with the native config
and the built-in metrics (`accuracy`, `auc`):
- binary: 3000 generated examples, a logistic model written here, example weights, slices by `group`;
- penguin: the bundled penguin eval split and a model trained by `generic-trainer train` (6 steps: a
  model far from perfect, so accuracy and AUC can differ; or --penguin-model), 3 classes, slices by
  `island` (the built-in `auc` is macro one-vs-rest, TFMA's and Keras' AUC on one-hot labels is micro:
  only the translated config is compared for AUC there).
Prints a table per case and exits 1 when a value differs beyond its tolerance.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

PENGUIN_STEPS = 6  # a model that is right on most, not all, eval examples: the comparison can tell
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PENGUIN = os.path.join(REPO, "examples", "penguin")
TOLERANCE = {"auc": 1e-3}
DEFAULT_TOLERANCE = 1e-5
COUNT_RELATIVE_TOLERANCE = 1e-6  # TFMA sums the weights in float32

BINARY_CONFIG = """
model_specs { label_key: "label" prediction_key: "probabilities" example_weight_key: "w" model_type: "tf_generic"
              signature_name: "serving_default" }
slicing_specs {}
slicing_specs { feature_keys: ["group"] }
metrics_specs {
  metrics { class_name: "ExampleCount" }
  metrics { class_name: "WeightedExampleCount" }
  metrics { class_name: "BinaryAccuracy" }
  metrics { class_name: "AUC" }
}
"""
BINARY_NATIVE = {
    "label_key": "label",
    "prediction_key": "probabilities",
    "example_weight_key": "w",
    "problem": "binary",
    "metrics": ["example_count", "weighted_example_count", "accuracy", "auc"],
    "slices": [["group"]],
}
PENGUIN_CONFIG = """
model_specs { label_key: "species" model_type: "tf_generic" }
slicing_specs {}
slicing_specs { feature_keys: ["island"] }
metrics_specs {
  metrics { class_name: "ExampleCount" }
  metrics { class_name: "SparseCategoricalAccuracy" }
  metrics { class_name: "AUC" }
}
"""
PENGUIN_NATIVE = {
    "label_key": "species",
    "metrics": ["example_count", "accuracy"],
    "slices": [["island"]],
}
# which value of each evaluation stands for which compared quantity
COMPARED = {
    # TFMA weights every metric when there is a weight key, ExampleCount too: the weighted count here.
    "binary": {
        "example count (weighted)": (
            "example_count",
            "weighted_example_count",
            "weighted_example_count",
        ),
        "weighted example count": (
            "weighted_example_count",
            "weighted_example_count",
            "weighted_example_count",
        ),
        "accuracy": ("binary_accuracy", "binary_accuracy", "accuracy"),
        "auc": ("auc", "auc", "auc"),
    },
    "penguin": {
        "example count": ("example_count", "example_count", "example_count"),
        "accuracy": ("sparse_categorical_accuracy", "sparse_categorical_accuracy", "accuracy"),
        "auc": ("auc", "auc", None),
    },
}


# --------------------------------------------------------------------------------------------
# The TFMA side (runs in the TFMA venv)
# --------------------------------------------------------------------------------------------


def run_tfma(model: str, data: str, config_path: str, out: str) -> None:
    """TFMA's metrics per slice, as {slice name: {metric: value}}, to `out`."""
    import tensorflow_model_analysis as tfma
    from google.protobuf import text_format
    from tensorflow_model_analysis.proto import config_pb2

    with open(config_path) as f:
        eval_config = text_format.Parse(f.read(), config_pb2.EvalConfig())
    shared = tfma.default_eval_shared_model(eval_saved_model_path=model, eval_config=eval_config)
    result = tfma.run_model_analysis(
        eval_shared_model=shared,
        eval_config=eval_config,
        data_location=data,
        file_format="tfrecords",
        output_path=os.path.join(os.path.dirname(out), "tfma"),
    )
    table = {}
    for slice_key, metrics in result.slicing_metrics:
        name = (
            ", ".join(
                f"{k}={v.decode() if isinstance(v, bytes) else v}" for k, v in sorted(slice_key)
            )
            or "Overall"
        )
        values = metrics[""][""]
        table[name] = {k: v.get("doubleValue") for k, v in values.items() if "doubleValue" in v}
    with open(out, "w") as f:
        json.dump(table, f, indent=1)


# --------------------------------------------------------------------------------------------
# The generic-trainer side
# --------------------------------------------------------------------------------------------


def write_binary_case(work: str) -> tuple[str, str]:
    """3000 examples (x, group, w, label) and a logistic SavedModel on x: (model dir, data dir)."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    data = os.path.join(work, "binary_data", "Split-eval")
    os.makedirs(data, exist_ok=True)
    with tf.io.TFRecordWriter(os.path.join(data, "data_tfrecord-00000-of-00001")) as writer:
        for _ in range(3000):
            label = int(rng.integers(0, 2))
            features = {
                "x": tf.train.Feature(
                    float_list=tf.train.FloatList(value=[rng.normal(label * 1.2, 1.0)])
                ),
                "w": tf.train.Feature(float_list=tf.train.FloatList(value=[rng.uniform(0.2, 3.0)])),
                "group": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[b"abc"[rng.integers(3) :][:1]])
                ),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            }
            writer.write(
                tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()
            )
    spec = {"x": tf.io.FixedLenFeature([1], tf.float32)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples):
        return {"probabilities": tf.sigmoid(1.5 * tf.io.parse_example(examples, spec)["x"] - 0.7)}

    model = os.path.join(work, "binary_model")
    tf.saved_model.save(tf.Module(), model, signatures={"serving_default": serve})
    return model, os.path.dirname(data)


def train_penguin(work: str) -> str:
    model = os.path.join(work, "penguin_model")
    subprocess.run(
        [
            os.path.join(REPO, ".venv", "bin", "generic-trainer"),
            "train",
            "--examples",
            os.path.join(PENGUIN, "data"),
            "--module-file",
            os.path.join(PENGUIN, "module.py"),
            "--schema",
            os.path.join(PENGUIN, "schema.pbtxt"),
            "--model-dir",
            model,
            "--train-steps",
            str(PENGUIN_STEPS),
            "--eval-steps",
            "2",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return model


def run_ours(model: str, data: str, config: str, out: str) -> dict[str, dict[str, float]]:
    """generic-trainer evaluate's metrics per slice ({slice name: {metric: value}})."""
    subprocess.run(
        [
            os.path.join(REPO, ".venv", "bin", "generic-trainer"),
            "evaluate",
            "--model",
            model,
            "--examples",
            data,
            "--eval-config",
            config,
            "--blessing-dir",
            out + ".blessing",
            "--metrics-file",
            out,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    with open(out) as f:
        result = json.load(f)
    return {"Overall": result["metrics"], **{s["slice"]: s["metrics"] for s in result["slices"]}}


def compare(case: str, tfma: dict, translated: dict, native: dict) -> bool:
    ok = True
    print(
        f"\n{case}: TFMA | generic-trainer, TFMA config | generic-trainer, native config (built-in metrics)"
    )
    for slice_name in sorted(tfma, key=lambda s: (s != "Overall", s)):
        for what, (k_tfma, k_translated, k_native) in COMPARED[case].items():
            reference = tfma[slice_name].get(k_tfma)
            values = [translated.get(slice_name, {}).get(k_translated)]
            if k_native:
                values.append(native.get(slice_name, {}).get(k_native))
            tolerance = TOLERANCE.get(what, DEFAULT_TOLERANCE)
            if "count" in what and reference is not None:
                tolerance = max(tolerance, COUNT_RELATIVE_TOLERANCE * abs(reference))
            diffs = [
                abs(v - reference) if v is not None and reference is not None else float("inf")
                for v in values
            ]
            good = all(d <= tolerance for d in diffs)
            ok &= good
            shown = " | ".join(f"{v:.6f}" if v is not None else "-" for v in [reference, *values])
            print(
                f"  {slice_name:<16} {what:<24} {shown}   max diff {max(diffs):.2e} {'ok' if good else 'DIFFERS'}"
            )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tfma-python", default="/tmp/tfma/bin/python")
    parser.add_argument("--penguin-model", help="a penguin model dir (default: train one, 6 steps)")
    parser.add_argument("--work", help="work dir (default: a temporary one)")
    parser.add_argument(
        "--tfma-side", nargs=4, metavar=("MODEL", "DATA", "CONFIG", "OUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.tfma_side:
        run_tfma(*args.tfma_side)
        return 0
    work = args.work or tempfile.mkdtemp(prefix="tfma-compare-")
    binary_model, binary_data = write_binary_case(work)
    penguin_model = args.penguin_model or train_penguin(work)
    serving = os.path.join(penguin_model, "Format-Serving")
    cases = {
        "binary": (binary_model, binary_data, "Split-eval", BINARY_CONFIG, BINARY_NATIVE),
        "penguin": (
            serving if os.path.isdir(serving) else penguin_model,
            os.path.join(PENGUIN, "data"),
            "Split-eval",
            PENGUIN_CONFIG,
            PENGUIN_NATIVE,
        ),
    }
    ok = True
    for case, (model, data, split, config, native_config) in cases.items():
        config_path = os.path.join(work, f"{case}.pbtxt")
        with open(config_path, "w") as f:
            f.write(config)
        tfma_out = os.path.join(work, f"{case}_tfma.json")
        subprocess.run(
            [
                args.tfma_python,
                os.path.abspath(__file__),
                "--tfma-side",
                model,
                os.path.join(data, split, "*"),
                config_path,
                tfma_out,
            ],
            check=True,
        )
        with open(tfma_out) as f:
            tfma = json.load(f)
        translated = run_ours(
            model, data, config_path, os.path.join(work, f"{case}_translated.json")
        )
        native = run_ours(
            model, data, json.dumps(native_config), os.path.join(work, f"{case}_native.json")
        )
        ok &= compare(case, tfma, translated, native)
    print("\nall equal within tolerance" if ok else "\nDIFFERENCES beyond tolerance")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
