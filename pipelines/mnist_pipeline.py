"""TFX's MNIST pipeline (tfx/examples/mnist/mnist_pipeline_native_keras.py), ported one to one to
this image's
components and run as a KFP v2 pipeline:

    data_pattern (TFRecords of tf.Example) ─> generic-import-examples ─ examples, output_schema
        (TFX: ImportExampleGen -> StatisticsGen -> SchemaGen(infer_feature_shape=True); the schema
        is inferred
         with shapes, e.g. image_floats [784])
    examples + output_schema + module_file ─> generic-transform ─ transform_graph,
    transformed_examples transformed_examples + output_schema + transform_graph ─> generic-trainer ─
    model
        (TFX's wiring: the *transformed* examples with the *raw* schema and the transform graph)
    model + examples (raw) + eval_config (TFMA EvalConfig) ─> generic-evaluator ─ blessing
    model + blessing + serving_model_dir ─> generic-pusher ─ pushed_model (<serving_model_dir>/<Unix
    seconds>/)

TFX's StatisticsGen and ExampleValidator have no step of their own: import-examples infers the
schema, and the trainer checks the records against it before the module runs. The module file is the
caller's: the bundled examples/mnist/mnist_module.py (run_local's default), or any TFX MNIST module
this image runs.

Compile (for Kubeflow Pipelines or Vertex AI Pipelines):
    python -m pipelines.mnist_pipeline --output mnist_pipeline.yaml [--image IMAGE]
    [--accuracy-threshold 0.8]
Run it on this machine with kfp.local, tasks as host processes (generic-trainer on PATH, no docker),
on data made by examples/mnist/make_data.py:
    python -m pipelines.mnist_pipeline --run-local --data-pattern 'DIR/*' --serving-model-dir
    out/serving \\
        --pipeline-root out/kfp-local --train-steps 200
"""

# No `from __future__ import annotations`: kfp reads the pipeline function's annotations as types.
import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from pipelines import components

PIPELINE_NAME = "generic-trainer-mnist-native-keras"
MODULE_FILE = os.path.join(components.REPO, "examples", "mnist", "mnist_module.py")


def mnist_eval_config(accuracy_threshold: float = 0.8) -> dict[str, Any]:
    """TFX's MNIST EvalConfig, as TFMA's JSON: sparse categorical accuracy over the whole eval
    split, with a lower
    bound the model must reach to be blessed (and so pushed)."""
    return {
        "model_specs": [{"label_key": "image_class"}],
        "slicing_specs": [{}],
        "metrics_specs": [
            {
                "metrics": [
                    {
                        "class_name": "SparseCategoricalAccuracy",
                        "threshold": {"value_threshold": {"lower_bound": accuracy_threshold}},
                    }
                ]
            }
        ],
    }


def build_pipeline(image: str | None = None, accuracy_threshold: float = 0.8) -> Any:
    """The pipeline function (compile it, or call it under kfp.local)."""
    from kfp import dsl

    import_examples_op = components.import_examples(image)
    transform_op = components.transform(image)
    trainer_op = components.trainer(image)
    evaluator_op = components.evaluator(image)
    pusher_op = components.pusher(image)
    default_eval_config = mnist_eval_config(accuracy_threshold)

    @dsl.pipeline(
        name=PIPELINE_NAME,
        description="TFX's MNIST pipeline (native Keras) on generic-trainer: import "
        "TFRecords, tf.Transform, train, evaluate, push.",
    )
    def mnist_pipeline(
        data_pattern: str,
        module_file: str,
        serving_model_dir: str,
        train_args: dict = {"num_steps": 5000},  # noqa: B006 - KFP pipeline parameter defaults
        eval_args: dict = {"num_steps": 100},  # noqa: B006
        custom_config: dict = {},  # noqa: B006
        eval_config: dict = default_eval_config,
        beam_pipeline_args: list = [],  # noqa: B006
    ):
        example_gen = import_examples_op(
            input_pattern=data_pattern, format="tfrecord", beam_pipeline_args=beam_pipeline_args
        )
        example_gen.set_display_name("ImportExampleGen")
        examples, schema = example_gen.outputs["examples"], example_gen.outputs["output_schema"]
        transform = transform_op(
            examples=examples,
            schema=schema,
            module_file=module_file,
            beam_pipeline_args=beam_pipeline_args,
        )
        transform.set_display_name("Transform")
        trainer = trainer_op(
            module_file=module_file,
            examples=transform.outputs["transformed_examples"],
            transform_graph=transform.outputs["transform_graph"],
            schema=schema,
            train_args=train_args,
            eval_args=eval_args,
            custom_config=custom_config,
            export_tflite=False,
        )
        trainer.set_display_name("Trainer.mnist")
        evaluator = evaluator_op(
            examples=examples, model=trainer.outputs["model"], eval_config=eval_config
        )
        evaluator.set_display_name("Evaluator.mnist")
        pusher = pusher_op(
            model=trainer.outputs["model"],
            model_blessing=evaluator.outputs["blessing"],
            push_destination=serving_model_dir,
        )
        pusher.set_display_name("Pusher.mnist")

    return mnist_pipeline


def compile_pipeline(output: str, image: str | None = None, accuracy_threshold: float = 0.8) -> str:
    """Compile the pipeline to `output` (YAML); returns the path."""
    from kfp import compiler

    compiler.Compiler().compile(build_pipeline(image, accuracy_threshold), output)
    return output


def run_local(
    pipeline_root: str,
    data_pattern: str,
    serving_model_dir: str,
    train_steps: int = 200,
    eval_steps: int = 10,
    module_file: str = MODULE_FILE,
    accuracy_threshold: float = 0.8,
    timeout_s: float | None = None,
) -> Any:
    """Run the pipeline with kfp.local on this host (generic-trainer on PATH, or beside this
    Python)."""
    from pipelines.host_runner import host_runner

    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    with host_runner(pipeline_root, env={"PATH": path}, timeout_s=timeout_s):
        return build_pipeline(accuracy_threshold=accuracy_threshold)(
            data_pattern=data_pattern,
            module_file=module_file,
            serving_model_dir=serving_model_dir,
            train_args={"num_steps": train_steps},
            eval_args={"num_steps": eval_steps},
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.mnist_pipeline", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--output", default="mnist_pipeline.yaml", help="compiled pipeline YAML")
    parser.add_argument(
        "--image", help="compile the components for this image (default: the checked-in YAML)"
    )
    parser.add_argument(
        "--accuracy-threshold", type=float, default=0.8, help="the evaluator's lower bound"
    )
    parser.add_argument(
        "--run-local", action="store_true", help="run here with kfp.local instead of compiling"
    )
    parser.add_argument("--data-pattern", help="TFRecord files of tf.Example, a glob (--run-local)")
    parser.add_argument(
        "--serving-model-dir", default="out/serving/mnist", help="push destination (--run-local)"
    )
    parser.add_argument(
        "--module-file", default=MODULE_FILE, help="the TFX module file (--run-local)"
    )
    parser.add_argument(
        "--pipeline-root", default="out/kfp-local", help="kfp.local output root (--run-local)"
    )
    parser.add_argument("--train-steps", type=int, default=200, help="train steps (--run-local)")
    args = parser.parse_args(argv)
    if args.run_local:
        if not args.data_pattern:
            parser.error(
                "--run-local needs --data-pattern (make data with examples/mnist/make_data.py)"
            )
        task = run_local(
            os.path.abspath(args.pipeline_root),
            args.data_pattern,
            os.path.abspath(args.serving_model_dir),
            args.train_steps,
            module_file=args.module_file,
            accuracy_threshold=args.accuracy_threshold,
        )
        print(json.dumps({"outputs": sorted(getattr(task, "outputs", {}) or {})}))
        return 0
    print(compile_pipeline(args.output, args.image, args.accuracy_threshold))
    return 0


if __name__ == "__main__":
    sys.exit(main())
