"""The penguin example as a KFP v2 pipeline: from a CSV to a blessed model.

    csv_uri ──> generic-import-examples ─ examples, output_schema ─> generic-transform ─
    transform_graph, schema_uri (column types) ──┘
    transformed_examples
        transformed_examples + schema + transform_graph ─> generic-tuner ─ best_hyperparameters ─>
        generic-trainer
    baseline_model_uri ─(if set)─> import-baseline-model ─> generic-evaluator (raw examples) ─>
    blessing, report
                                                                    │ model + blessing
                                                          generic-infra-validator ─> blessing
                                                          (INFRA_BLESSED), metrics

import-examples turns the CSV into TFX Examples (train/eval by a stable hash), transform runs the
module's preprocessing_fn with tensorflow-transform on Beam and writes the transformed examples, and
the tuner and trainer are wired as TFX wires its Trainer: `examples` = Transform's transformed
examples, `schema` = the raw schema, `transform_graph` (module_transform.py asks for the transformed
schema; its serving model applies the transform graph to raw tf.Examples, so the evaluator and the
infra-validator send raw examples). The evaluator compares the new model with `baseline_model_uri`
(e.g. the model now serving) when it is set, and judges it on the eval config's bounds alone when it
is empty (the first model). The infra-validator does not load a model the evaluator did not bless;
when it blesses one, it writes `warmup_requests` TF Serving warm-up requests into the model
(Format-Serving/assets.extra/tf_serving_warmup_requests), so the uploaded model loads warm.

Compile (for Kubeflow Pipelines or Vertex AI Pipelines):
    python -m pipelines.penguin_pipeline --output penguin_pipeline.yaml [--no-tune] [--image IMAGE]
Run it on this machine with kfp.local, tasks as host processes (generic-trainer on PATH, no docker):
    python -m pipelines.penguin_pipeline --run-local --pipeline-root out/kfp-local --train-steps 200

The pipeline's parameters name where the CSV, the schema and the module file live (gs:// on a
cluster); `beam_pipeline_args` sends import-examples and transform to another Beam runner (e.g.
Dataflow). `export_tflite` (on by default, with `tflite_quantization`) makes the trainer also write
<model>/Format-TFLite/model.tflite, checked against the SavedModel on the eval split. It takes the
parsed features (TFLite has no tf.Example parser) and runs the transform graph inside:
module_transform.py's vocabularies give unknown strings a default id instead of tf.Transform's hash
buckets (num_oov_buckets), since string hashing is not among TFLite's built-in ops (see the README's
"TFLite export"). A module whose serving model does not convert fails the trainer, after it
published the SavedModel: set export_tflite=False for it.
"""

# No `from __future__ import annotations`: kfp reads the pipeline function's annotations as types.
import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from pipelines import components

PIPELINE_NAME = "generic-trainer-penguin"
# Thresholds of the penguin classifier: at least 80% accuracy, and no more than 2 points below the
# baseline.
EVAL_CONFIG = {
    "label_key": "species",
    "slices": [["island"], ["sex"]],
    "thresholds": {
        "accuracy": {
            "lower_bound": 0.8,
            "change": {"direction": "higher_is_better", "absolute": -0.02},
        }
    },
}
EXAMPLE_DIR = os.path.join(components.REPO, "examples", "penguin")


def build_pipeline(image: str | None = None, tune: bool = True) -> Any:
    """The pipeline function (compile it, or call it under kfp.local); `tune=False` leaves the tuner
    out."""
    from kfp import dsl
    from kfp.dsl import Artifact, Model

    import_examples_op = components.import_examples(image)
    transform_op = components.transform(image)
    trainer_op = components.trainer(image)
    tuner_op = components.tuner(image) if tune else None
    evaluator_op = components.evaluator(image)
    infra_validator_op = components.infra_validator(image)

    @dsl.pipeline(
        name=PIPELINE_NAME,
        description="Palmer penguins from CSV: import, tf.Transform, tune and train a "
        "Keras classifier, evaluate and infra-validate it with "
        "generic-trainer (TFX compatible module).",
    )
    def penguin_pipeline(
        csv_uri: str,
        schema_uri: str,
        module_file: str,
        splits: str = "train:2,eval:1",
        beam_pipeline_args: list = [],  # noqa: B006 - KFP pipeline parameter defaults
        train_args: dict = {"num_steps": 500},  # noqa: B006
        eval_args: dict = {"num_steps": 20},  # noqa: B006
        custom_config: dict = {"epochs": 5, "batch_size": 32},  # noqa: B006
        tuner_train_args: dict = {"num_steps": 100},  # noqa: B006
        max_trials: int = 4,
        eval_config: dict = EVAL_CONFIG,  # noqa: B006
        baseline_model_uri: str = "",
        warmup_requests: int = 10,
        model_display_name: str = "",
        model_location: str = "us-central1",
        export_tflite: bool = True,
        tflite_quantization: str = "none",
    ):
        column_types = dsl.importer(
            artifact_uri=schema_uri, artifact_class=Artifact, reimport=False
        )
        column_types.set_display_name("import-schema")
        imported = import_examples_op(
            input_pattern=csv_uri,
            format="csv",
            schema=column_types.output,
            splits=splits,
            beam_pipeline_args=beam_pipeline_args,
        )
        examples, schema = imported.outputs["examples"], imported.outputs["output_schema"]
        transform = transform_op(
            examples=examples,
            schema=schema,
            module_file=module_file,
            beam_pipeline_args=beam_pipeline_args,
        )
        transform_graph, transformed = (
            transform.outputs["transform_graph"],
            transform.outputs["transformed_examples"],
        )
        tuned: dict[str, Any] = {}
        if tuner_op is not None:
            tuner_task = tuner_op(
                examples=transformed,
                schema=schema,
                transform_graph=transform_graph,
                module_file=module_file,
                train_args=tuner_train_args,
                eval_args=eval_args,
                custom_config=custom_config,
                max_trials=max_trials,
            )
            tuned["hyperparameters"] = tuner_task.outputs["best_hyperparameters"]
        trainer = trainer_op(
            examples=transformed,
            schema=schema,
            transform_graph=transform_graph,
            module_file=module_file,
            train_args=train_args,
            eval_args=eval_args,
            custom_config=custom_config,
            export_tflite=export_tflite,
            tflite_quantization=tflite_quantization,
            **tuned,
        )
        model = trainer.outputs["model"]

        def evaluate_and_validate(**baseline: Any) -> None:
            evaluator = evaluator_op(
                model=model, examples=examples, schema=schema, eval_config=eval_config, **baseline
            )
            validated = infra_validator_op(
                model=model,
                examples=examples,
                schema=schema,
                model_blessing=evaluator.outputs["blessing"],
                write_warmup=warmup_requests,
            )
            upload_if_blessed(
                validated.outputs["blessed"], trainer, model_display_name, model_location
            )

        # Both branches hold their own evaluator -> infra-validator (kfp.local cannot merge branch
        # artifacts
        # with dsl.OneOf), so one compiled pipeline serves the first model and every later one.
        with dsl.If(baseline_model_uri != "", name="with-baseline"):
            baseline = dsl.importer(
                artifact_uri=baseline_model_uri, artifact_class=Model, reimport=False
            )
            baseline.set_display_name("import-baseline-model")
            evaluate_and_validate(baseline_model=baseline.output)
        with dsl.Else(name="first-model"):
            evaluate_and_validate()

    return penguin_pipeline


def upload_if_blessed(blessed: Any, trainer: Any, display_name: Any, location: Any) -> None:
    """Vertex AI Model Registry: when the model is blessed (evaluator and infra-validator) and a
    display name is given, import the trainer's SavedModel as a google.UnmanagedContainerModel and
    upload it with GCPC's
    ModelUploadOp. Pipeline steps; they run on Vertex AI Pipelines (GCPC calls the Vertex API)."""
    from google_cloud_pipeline_components.types.artifact_types import UnmanagedContainerModel
    from google_cloud_pipeline_components.v1.model import ModelUploadOp
    from kfp import dsl

    # The pipeline parameter first: kfp.local then skips the whole block without resolving the
    # nested output.
    with dsl.If(display_name != "", name="upload-requested"):
        with dsl.If(blessed == True, name="blessed"):  # noqa: E712 - a pipeline condition, not Python's ==
            serving = dsl.importer(
                artifact_uri=trainer.outputs["serving_model_uri"],
                artifact_class=UnmanagedContainerModel,
                metadata={
                    "containerSpec": {"imageUri": trainer.outputs["serving_container_image"]},
                    "predictSchemata": {
                        "instanceSchemaUri": trainer.outputs["instance_schema_uri"],
                        "predictionSchemaUri": trainer.outputs["prediction_schema_uri"],
                    },
                },
            )
            serving.set_display_name("import-serving-model")
            ModelUploadOp(
                display_name=display_name,
                location=location,
                unmanaged_container_model=serving.output,
            )


def compile_pipeline(output: str, image: str | None = None, tune: bool = True) -> str:
    """Compile the pipeline to `output` (YAML); returns the path."""
    from kfp import compiler

    compiler.Compiler().compile(build_pipeline(image, tune), output)
    return output


def run_local(
    pipeline_root: str,
    train_steps: int,
    tune: bool,
    max_trials: int,
    baseline_model_uri: str = "",
    eval_steps: int = 20,
    timeout_s: float | None = None,
) -> Any:
    """Run the pipeline with kfp.local on this host (generic-trainer on PATH, or beside this
    Python)."""
    from pipelines.host_runner import host_runner

    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    with host_runner(pipeline_root, env={"PATH": path}, timeout_s=timeout_s):
        return build_pipeline(tune=tune)(
            csv_uri=os.path.join(EXAMPLE_DIR, "penguins.csv"),
            schema_uri=os.path.join(EXAMPLE_DIR, "schema.pbtxt"),
            module_file=os.path.join(EXAMPLE_DIR, "module_transform.py"),
            train_args={"num_steps": train_steps},
            eval_args={"num_steps": eval_steps},
            tuner_train_args={"num_steps": max(train_steps // 4, 1)},
            max_trials=max_trials,
            baseline_model_uri=baseline_model_uri,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.penguin_pipeline", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--output", default="penguin_pipeline.yaml", help="compiled pipeline YAML")
    parser.add_argument(
        "--image", help="compile the components for this image (default: the checked-in YAML)"
    )
    parser.add_argument("--no-tune", dest="tune", action="store_false", help="leave the tuner out")
    parser.add_argument(
        "--run-local", action="store_true", help="run here with kfp.local instead of compiling"
    )
    parser.add_argument(
        "--pipeline-root", default="out/kfp-local", help="kfp.local output root (--run-local)"
    )
    parser.add_argument("--train-steps", type=int, default=200, help="train steps (--run-local)")
    parser.add_argument("--max-trials", type=int, default=2, help="tuner trials (--run-local)")
    parser.add_argument(
        "--baseline-model-uri", default="", help="model to evaluate against (--run-local)"
    )
    args = parser.parse_args(argv)
    if args.run_local:
        task = run_local(
            os.path.abspath(args.pipeline_root),
            args.train_steps,
            args.tune,
            args.max_trials,
            args.baseline_model_uri,
        )
        print(json.dumps({"outputs": sorted(getattr(task, "outputs", {}) or {})}))
        return 0
    print(compile_pipeline(args.output, args.image, args.tune))
    return 0


if __name__ == "__main__":
    sys.exit(main())
