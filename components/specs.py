"""The trainer, tuner, evaluator and infra-validator as KFP v2 container components.

Each component runs the image's `generic-trainer` with the whole executor input (`{{$}}`) and the
executor-output path, so the runtime reads every input and output location from KFP's own JSON:

    command: [generic-trainer]
    args:    [VERB, --executor-input, {{$}}, --executor-output-file, {{$.outputs.output_file}}]
    (VERB: train, tune, evaluate or infra-validate)

`command` equals the image's ENTRYPOINT (images/trainer/Dockerfile), so the same container also
runs under `docker run IMAGE train ...` and as a Vertex AI custom job.

The image is one setting: `DEFAULT_IMAGE`, overridden by `$GENERIC_TRAINER_IMAGE` or by
`python -m components.build --image IMAGE` (which cloudbuild.yaml runs for the tag it pushes).
"""

from typing import Any

# The image the project publishes; cloudbuild.yaml recompiles the YAML for the image it builds.
DEFAULT_IMAGE = "ghcr.io/generic-trainer/trainer:latest"
IMAGE_ENV = "GENERIC_TRAINER_IMAGE"
ENTRYPOINT = "generic-trainer"


def resolve_image(image: str | None = None) -> str:
    """The image to compile into the components: `image`, else $GENERIC_TRAINER_IMAGE, else DEFAULT_IMAGE."""
    import os

    return image or os.environ.get(IMAGE_ENV) or DEFAULT_IMAGE


def _container(image: str, verb: str, run_identity: bool = False) -> Any:
    from kfp import dsl

    args = [
        verb,
        "--executor-input", dsl.PIPELINE_TASK_EXECUTOR_INPUT_PLACEHOLDER,
        "--executor-output-file", dsl.PIPELINE_TASK_EXECUTOR_OUTPUT_PATH_PLACEHOLDER,
    ]
    if run_identity:
        args += run_identity_args()
    return dsl.ContainerSpec(image=image, command=[ENTRYPOINT], args=args)


def run_identity_args() -> list[str]:
    """`--run-id`/`--task-name` filled by KFP (and kfp.local): checkpoints go to <checkpoint dir>/<run>/<task>.

    The pipeline run's uuid and the task's name are the same for every retry of a task and differ
    between runs, so a retried pod resumes its own checkpoint and a new run never continues an old one.
    """
    from kfp import dsl

    return ["--run-id", dsl.PIPELINE_JOB_ID_PLACEHOLDER, "--task-name", dsl.PIPELINE_TASK_NAME_PLACEHOLDER]


def trainer_component(image: str | None = None) -> Any:
    """The trainer component (`generic-trainer train`) for `image` (see resolve_image)."""
    from typing import Optional  # noqa: UP035 - kfp reads the annotations at runtime

    from kfp import dsl
    from kfp.dsl import HTML, Artifact, Dataset, Input, Metrics, Model, Output

    image = resolve_image(image)

    @dsl.container_component
    def generic_trainer(
        examples: Input[Dataset],
        model: Output[Model],
        model_run: Output[Artifact],
        metrics: Output[Metrics],
        report: Output[HTML],
        schema: Optional[Input[Artifact]] = None,  # noqa: UP045
        transform_graph: Optional[Input[Artifact]] = None,  # noqa: UP045
        hyperparameters: Optional[Input[Artifact]] = None,  # noqa: UP045
        base_model: Optional[Input[Model]] = None,  # noqa: UP045
        module_file: str = "",
        run_fn: str = "run_fn",
        train_args: Optional[dict] = None,  # noqa: UP045
        eval_args: Optional[dict] = None,  # noqa: UP045
        custom_config: Optional[dict] = None,  # noqa: UP045
        strategy: str = "auto",
        keras: Optional[str] = None,  # noqa: UP045
        module_sha256: str = "",
        task: str = "",
        experiment: str = "",
        config: str = "",
        mode: str = "",
        config_file: Optional[list] = None,  # noqa: UP045
        params_override: str = "",
        checkpoint_dir: str = "",
        cluster_timeout: Optional[float] = None,  # noqa: UP045
        mixed_precision: str = "",
        jit_compile: Optional[bool] = None,  # noqa: UP045
        steps_per_execution: int = 0,  # an int input must have a value: kfp.local fails on an unset one
        serving_image: str = "",
        serving_accelerator: str = "cpu",
        serving_image_region: str = "us",
        export_tflite: bool = False,
        tflite_quantization: str = "none",
        tflite_tolerance: Optional[float] = None,  # noqa: UP045
        serving_model_uri: dsl.OutputPath(str) = None,
        serving_container_image: dsl.OutputPath(str) = None,
        instance_schema_uri: dsl.OutputPath(str) = None,
        prediction_schema_uri: dsl.OutputPath(str) = None,
    ):
        """Trains a TensorFlow/Keras model with the run_fn of a TFX-style module file (TFX Trainer compatible).

        Args:
            examples: Examples in TFX layout: Split-<name>/*.gz (gzipped TFRecords of tf.Example).
            module_file: The user module: a .py path, a gs:// URI, or a dotted module name in the image.
            model: The trained model; the serving SavedModel is at <model>/Format-Serving.
            model_run: TensorBoard logs of the run (fn_args.model_run_dir).
            metrics: The final evaluation and training metrics.
            report: HTML report of the run: loss and metric curves, resolved inputs, strategy, metrics.
            schema: tensorflow-metadata Schema (schema.pbtxt or a dir holding one), fn_args.schema_path.
            transform_graph: tensorflow-transform output dir, fn_args.transform_output.
            hyperparameters: Tuner output (best_hyperparameters.txt or its dir), fn_args.hyperparameters.
            base_model: A model to warm-start from, fn_args.base_model.
            run_fn: The function to call in the module.
            train_args: {"num_steps": N, "splits": ["train"]}; num_steps 0 or unset means fn_args.train_steps None.
            eval_args: {"num_steps": N, "splits": ["eval"]}.
            custom_config: JSON object passed as fn_args.custom_config (integral numbers arrive as ints).
            strategy: tf.distribute strategy: auto, default, one_device, mirrored or multi_worker_mirrored.
            keras: What tf.keras means for the module: keras3 or tf_keras (unset: keras3, unless the image
                sets TF_USE_LEGACY_KERAS=1).
            module_sha256: Refuse to run a module file whose sha256 differs (empty: no check).
            task: The Task API instead of a run_fn module: "module:Class" (module a .py path, gs:// URI or
                dotted name); the runtime's own loop trains it. Give either task or module_file.
            experiment: A registered experiment name for the task (its default config).
            config: YAML or JSON overrides of the task's experiment config, e.g. "trainer: {train_steps: 500}".
            mode: The task loop's mode: train, eval, train_and_eval (default) or continuous_eval.
            config_file: YAML/JSON files (paths or gs:// URIs) of experiment overrides for the task, applied in
                order before config.
            params_override: Last overrides of the task's experiment config, e.g.
                "trainer.train_steps=500,task.train_data.global_batch_size=64".
            checkpoint_dir: Base dir of the checkpoints (a gs:// URI on Vertex); the run's are under
                <checkpoint_dir>/<pipeline run uuid>/<task name>, so a retried task resumes its own and two runs
                never share one. Empty: $AIP_CHECKPOINT_DIR the same way, else inside the model_run artifact.
            cluster_timeout: Multi-worker: seconds to wait for every replica to connect before failing (default 900).
            mixed_precision: Keras global dtype policy while run_fn runs: mixed_float16 or mixed_bfloat16 (empty:
                the module's own).
            jit_compile: Compile train/eval steps with XLA (model.compile(jit_compile=...)); unset: Keras' default.
            steps_per_execution: Batches per tf.function call (model.compile(steps_per_execution=N)); 0: the
                module's own.
            serving_image: The serving container the model artifact names for Vertex AI Model Registry (its
                containerSpec metadata); empty: Vertex's prebuilt TF Serving image for the TensorFlow version.
            serving_accelerator: cpu or gpu: which prebuilt image (tf2-cpu or tf2-gpu).
            serving_image_region: us, europe or asia: the prebuilt image's multi-region.
            export_tflite: Also write <model>/Format-TFLite/model.tflite (TFLite built-in ops), checked against the
                SavedModel on the eval examples; the model's metadata records its size, quantization and the
                largest output difference. A model that cannot convert fails the task after the SavedModel is
                published.
            tflite_quantization: none, dynamic or float16 (post-training quantization of the TFLite model).
            tflite_tolerance: Largest absolute output difference from the SavedModel accepted; unset: 1e-4 for
                none, 0.05 for float16, 0.1 for dynamic.
            serving_model_uri: The SavedModel's URI (<model>/Format-Serving), for a dsl.importer of
                google.UnmanagedContainerModel in front of GCPC's ModelUploadOp.
            serving_container_image: The serving container image (the model artifact's containerSpec.imageUri).
            instance_schema_uri: OpenAPI schema of one serving_default instance (<model>/schemata/instance.yaml),
                Vertex's predictSchemata.instanceSchemaUri; empty when the signature's shapes are unknown.
            prediction_schema_uri: The same for one prediction (<model>/schemata/prediction.yaml).
        """
        return _container(image, "train", run_identity=True)

    return generic_trainer


def tuner_component(image: str | None = None) -> Any:
    """The tuner component (`generic-trainer tune`) for `image` (see resolve_image)."""
    from typing import Optional  # noqa: UP035 - kfp reads the annotations at runtime

    from kfp import dsl
    from kfp.dsl import HTML, Artifact, Dataset, Input, Metrics, Model, Output

    image = resolve_image(image)

    @dsl.container_component
    def generic_tuner(
        examples: Input[Dataset],
        module_file: str,
        best_hyperparameters: Output[Artifact],
        tuner_results: Output[Artifact],
        metrics: Output[Metrics],
        report: Output[HTML],
        schema: Optional[Input[Artifact]] = None,  # noqa: UP045
        transform_graph: Optional[Input[Artifact]] = None,  # noqa: UP045
        hyperparameters: Optional[Input[Artifact]] = None,  # noqa: UP045
        tuner_fn: str = "tuner_fn",
        train_args: Optional[dict] = None,  # noqa: UP045
        eval_args: Optional[dict] = None,  # noqa: UP045
        custom_config: Optional[dict] = None,  # noqa: UP045
        base_model: Optional[Input[Model]] = None,  # noqa: UP045
        max_trials: int = 0,  # an int input must have a value: kfp.local fails on an unset one
        module_sha256: str = "",
        worker_timeout: float = 600.0,
        strategy: str = "auto",
        checkpoint_dir: str = "",
    ):
        """Searches hyperparameters with the tuner_fn of a TFX-style module file (TFX Tuner compatible).

        Args:
            examples: Examples in TFX layout: Split-<name>/*.gz (gzipped TFRecords of tf.Example).
            module_file: The user module: a .py path, a gs:// URI, or a dotted module name in the image.
            best_hyperparameters: Dir holding best_hyperparameters.txt (keras-tuner config JSON), for the trainer.
            tuner_results: Every trial: tuner_results.json, a list of {trial_id, score, **values}.
            metrics: The best trial's score.
            report: HTML report of the search: trials table and score per trial.
            schema: tensorflow-metadata Schema (schema.pbtxt or a dir holding one), fn_args.schema_path.
            transform_graph: tensorflow-transform output dir, fn_args.transform_output.
            hyperparameters: Base hyperparameters, fn_args.hyperparameters.
            tuner_fn: The function to call in the module; returns TunerFnResult(tuner, fit_kwargs).
            train_args: {"num_steps": N, "splits": ["train"]}.
            eval_args: {"num_steps": N, "splits": ["eval"]}.
            custom_config: JSON object passed as fn_args.custom_config (integral numbers arrive as ints).
            base_model: A model to warm-start trials from, fn_args.base_model.
            max_trials: Override the tuner's max_trials (0: the tuner_fn's own).
            module_sha256: Refuse to run a module file whose sha256 differs (empty: no check).
            worker_timeout: Distributed tuning: seconds the chief waits for a silent worker before failing.
            strategy: tf.distribute strategy of each trial: auto, default, one_device or mirrored.
            checkpoint_dir: Base dir of the search state (keras-tuner's trials); the run's are under
                <checkpoint_dir>/<pipeline run uuid>/<task name>, so a retried task resumes its own search and two
                runs never share one. Empty: $AIP_CHECKPOINT_DIR the same way, else beside best_hyperparameters.
        """
        return _container(image, "tune", run_identity=True)

    return generic_tuner


def evaluator_component(image: str | None = None) -> Any:
    """The evaluator component (`generic-trainer evaluate`) for `image` (see resolve_image)."""
    from typing import Optional  # noqa: UP035 - kfp reads the annotations at runtime

    from kfp import dsl
    from kfp.dsl import HTML, Artifact, Dataset, Input, Metrics, Model, Output

    image = resolve_image(image)

    @dsl.container_component
    def generic_evaluator(
        model: Input[Model],
        examples: Input[Dataset],
        eval_config: dict,
        evaluation: Output[Metrics],
        blessing: Output[Artifact],
        report: Output[HTML],
        baseline_model: Optional[Input[Model]] = None,  # noqa: UP045
        schema: Optional[Input[Artifact]] = None,  # noqa: UP045
        eval_splits: Optional[list] = None,  # noqa: UP045
        batch_size: int = 256,
        timeout: float = 300.0,
        memory_limit: str = "8GiB",
    ):
        """Evaluates a model's serving_default on the eval split against thresholds and a baseline (TFX Evaluator).

        Args:
            model: The model to judge (a trainer model: <model>/Format-Serving).
            examples: Examples in TFX layout: Split-<name>/*.gz (gzipped TFRecords of tf.Example).
            eval_config: {"label_key", "prediction_key", "problem", "metrics", "slices", "thresholds"}; see the
                README (thresholds: {"accuracy": {"lower_bound": 0.8, "change": {"direction": "higher_is_better",
                "absolute": -0.01}}}).
            evaluation: Overall metrics as scalars (baseline_<name> for the baseline); the file holds everything
                as JSON (slices, confusion matrix, threshold checks).
            blessing: TFX-style blessing dir: BLESSED or NOT_BLESSED (reasons inside); metadata blessed 1|0.
            report: HTML report: verdict, comparison with the baseline, slices, confusion matrix.
            baseline_model: The model to compare with (e.g. the last blessed one); without it change thresholds
                are skipped and the model is judged on its bounds.
            schema: tensorflow-metadata Schema; the label and slice features are checked against it.
            eval_splits: Splits to evaluate on (default ["eval"]).
            batch_size: Examples per serving_default call.
            timeout: Seconds the sandboxed evaluation process has to load the models, then each batch.
            memory_limit: Address-space limit of the evaluation process (e.g. 8GiB: on CPU; 0: none, GPUs used).
        """
        return _container(image, "evaluate")

    return generic_evaluator


def infra_validator_component(image: str | None = None) -> Any:
    """The infra-validator component (`generic-trainer infra-validate`) for `image` (see resolve_image)."""
    from typing import Optional  # noqa: UP035 - kfp reads the annotations at runtime

    from kfp import dsl
    from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output

    image = resolve_image(image)

    @dsl.container_component
    def generic_infra_validator(
        model: Input[Model],
        examples: Input[Dataset],
        blessing: Output[Artifact],
        metrics: Output[Metrics],
        model_blessing: Optional[Input[Artifact]] = None,  # noqa: UP045
        eval_splits: Optional[list] = None,  # noqa: UP045
        num_requests: int = 10,
        batch_size: int = 8,
        timeout: float = 300.0,
        memory_limit: str = "8GiB",
        blessed: dsl.OutputPath(bool) = None,
    ):
        """Tries a model in a sandboxed serving process before it ships (TFX InfraValidator).

        Args:
            model: The model to try (a trainer model: <model>/Format-Serving).
            examples: Examples in TFX layout; requests are serialized tf.Examples of the eval split.
            blessing: TFX-style blessing dir: INFRA_BLESSED or INFRA_NOT_BLESSED (the reason inside); metadata
                blessed 1|0, p50/p99 latency.
            metrics: Load time, p50 and p99 latency (ms), requests sent and failed.
            model_blessing: The evaluator's blessing: a NOT_BLESSED model is not loaded and is INFRA_NOT_BLESSED.
            eval_splits: Splits the requests are taken from (default ["eval"]).
            num_requests: Timed requests (after two warm-ups).
            batch_size: Serialized tf.Examples per request.
            timeout: Seconds the serving process has to load the model and answer every request.
            memory_limit: Address-space limit of the serving process (e.g. 8GiB; 0: none); it runs on CPU.
            blessed: True when the model is INFRA_BLESSED (so also blessed by the evaluator), for dsl.If.
        """
        return _container(image, "infra-validate")

    return generic_infra_validator


def import_examples_component(image: str | None = None) -> Any:
    """The import-examples component (`generic-trainer import-examples`) for `image` (see resolve_image)."""
    from typing import Optional  # noqa: UP035 - kfp reads the annotations at runtime

    from kfp import dsl
    from kfp.dsl import Artifact, Dataset, Input, Output

    image = resolve_image(image)

    @dsl.container_component
    def generic_import_examples(
        examples: Output[Dataset],
        output_schema: Output[Artifact],
        input_pattern: str = "",
        format: str = "csv",  # noqa: A002 - the flag's name
        schema: Optional[Input[Artifact]] = None,  # noqa: UP045
        splits: str = "train:2,eval:1",
        input_splits: Optional[dict] = None,  # noqa: UP045
        beam_pipeline_args: Optional[list] = None,  # noqa: UP045
    ):
        """Imports CSV or Parquet files as TFX Examples on Apache Beam (TFX CsvExampleGen compatible layout).

        Args:
            examples: Examples in TFX layout: Split-<name>/data_tfrecord-*.gz (gzipped TFRecords of tf.Example)
                and schema.pbtxt; metadata: split_names, num_examples per split, feature_count.
            output_schema: Dir holding schema.pbtxt: the schema given, or the one inferred from the data.
            input_pattern: Files to read, a glob (gs:// allowed). Give it or input_splits.
            format: csv (with a header line) or parquet.
            schema: tensorflow-metadata Schema giving each column's type; the columns must match its features.
                Without it types are inferred (INT, FLOAT or BYTES per column).
            splits: Hash buckets per split, in order: "train:2,eval:1" (the default; a record goes to the split
                whose bucket range holds SHA-256(record) mod the total, as in TFX's ExampleGen).
            input_splits: One pattern per split instead of input_pattern, e.g. {"train": "gs://b/train/*.csv"}.
            beam_pipeline_args: Beam options, e.g. ["--runner=DataflowRunner", "--project=P", "--region=R",
                "--temp_location=gs://B/tmp"]; default: the DirectRunner in the container.
        """
        return _container(image, "import-examples")

    return generic_import_examples


def transform_component(image: str | None = None) -> Any:
    """The transform component (`generic-trainer transform`) for `image` (see resolve_image)."""
    from typing import Optional  # noqa: UP035 - kfp reads the annotations at runtime

    from kfp import dsl
    from kfp.dsl import Artifact, Dataset, Input, Output

    image = resolve_image(image)

    @dsl.container_component
    def generic_transform(
        examples: Input[Dataset],
        schema: Input[Artifact],
        module_file: str,
        transform_graph: Output[Artifact],
        transformed_examples: Output[Dataset],
        preprocessing_fn: str = "preprocessing_fn",
        analyze_splits: Optional[list] = None,  # noqa: UP045
        transform_splits: Optional[list] = None,  # noqa: UP045
        module_sha256: str = "",
        beam_pipeline_args: Optional[list] = None,  # noqa: UP045
    ):
        """Runs a module's preprocessing_fn with tensorflow-transform on Apache Beam (TFX Transform compatible).

        Args:
            examples: Raw examples in TFX layout: Split-<name>/*.gz.
            schema: The raw examples' tensorflow-metadata Schema (schema.pbtxt or a dir holding one).
            module_file: The user module: a .py path, a gs:// URI, or a dotted module name in the image.
            transform_graph: tf.Transform output (transform_fn/, transformed_metadata/, metadata/), the
                trainer's transform_graph; metadata: analyze_splits, feature_count, raw_feature_count.
            transformed_examples: The transformed examples in TFX layout (Split-<name>/transformed_examples-*.gz);
                metadata: split_names, num_examples per split, feature_count.
            preprocessing_fn: The function to call in the module.
            analyze_splits: Splits the analyzers see (default ["train"]).
            transform_splits: Splits to transform (default ["train", "eval"]).
            module_sha256: Refuse to run a module file whose sha256 differs (empty: no check).
            beam_pipeline_args: Beam options, e.g. ["--runner=DataflowRunner", "--project=P", "--region=R",
                "--temp_location=gs://B/tmp"]; default: the DirectRunner in the container.
        """
        return _container(image, "transform")

    return generic_transform
