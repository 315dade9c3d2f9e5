"""The verbs as KFP v2 container components, built in-process from their declarations.

One place makes a verb's component: `components/specs.py` (which compiles the checked-in
components/<name>/component.yaml) and the tfx-pipeline verb (which builds a TFX pipeline's KFP
pipeline inside the image, for the config's image) both call `component`. Each component runs the
image's `generic-trainer` with the whole executor input (`{{$}}`) and the executor-output path:

    command: [generic-trainer]
    args:    [VERB, --executor-input, {{$}}, --executor-output-file, {{$.outputs.output_file}}]

kfp is imported inside the functions (the runtime's verbs stay light).
"""

from __future__ import annotations

from typing import Any

from generic_trainer.intake.options import Verb, component_function

ENTRYPOINT = "generic-trainer"


def run_identity_args() -> list[str]:
    """`--run-id`/`--task-name` filled by KFP (and kfp.local): checkpoints go to <checkpoint
    dir>/<run>/<task>.

    The pipeline run's uuid and the task's name are the same for every retry of a task and differ
    between runs, so a retried pod resumes its own checkpoint and a new run never continues an old
    one.

    Returns:
      The extra container args.
    """
    from kfp import dsl

    return [
        "--run-id",
        dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        "--task-name",
        dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
    ]


def container(image: str, verb: str, run_identity: bool = False) -> Any:
    """The ContainerSpec running `generic-trainer VERB` with KFP's executor input.

    Args:
      image: the container image.
      verb: the verb's name.
      run_identity: whether KFP's run id and task name are passed too (train, tune).

    Returns:
      A kfp `dsl.ContainerSpec`.
    """
    from kfp import dsl

    args = [
        verb,
        "--executor-input",
        dsl.PIPELINE_TASK_EXECUTOR_INPUT_PLACEHOLDER,
        "--executor-output-file",
        dsl.PIPELINE_TASK_EXECUTOR_OUTPUT_PATH_PLACEHOLDER,
    ]
    if run_identity:
        args += run_identity_args()
    return dsl.ContainerSpec(image=image, command=[ENTRYPOINT], args=args)


def component(verb: Verb, image: str) -> Any:
    """The KFP container component of `verb` for `image`.

    Args:
      verb: the verb's declaration (its inputs and outputs become the component's).
      image: the container image.

    Returns:
      The kfp container component (call it inside a pipeline function, or compile it).
    """
    from kfp import dsl

    run_identity = verb.component.run_identity if verb.component else False
    return dsl.container_component(
        component_function(verb, lambda: container(image, verb.name, run_identity=run_identity))
    )


def components_by_name(image: str) -> dict[str, Any]:
    """The components a TFX pipeline's steps name (tfx_dsl.steps.COMPONENTS), for `image`.

    Args:
      image: the container image.

    Returns:
      Component name -> kfp component (`importer` is kfp's own dsl.importer: not listed).
    """
    from generic_trainer.intake import (
        example_gen_options,
        fit_options,
        infer_options,
        judge_options,
        push_options,
        resolve_options,
        transform_options,
    )

    verbs = {
        "import_examples": example_gen_options.IMPORT_EXAMPLES,
        "transform": transform_options.TRANSFORM,
        "tuner": fit_options.TUNE,
        "trainer": fit_options.TRAIN,
        "evaluator": judge_options.EVALUATE,
        "infra_validator": judge_options.INFRA_VALIDATE,
        "pusher": push_options.PUSH,
        "bulk_inferrer": infer_options.BULK_INFER,
        "resolver": resolve_options.RESOLVE,
    }
    return {name: component(verb, image) for name, verb in verbs.items()}
