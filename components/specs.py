"""The verbs as KFP v2 container components (trainer, tuner, evaluator, infra-validator,
import-examples, transform, pusher, bulk-inferrer).

Each component's inputs and outputs are generated from its verb's declaration in the runtime
(generic_trainer/intake/fit_options.py, judge_options.py, data_options.py, push_options.py,
infer_options.py; see generic_trainer/intake/options.py):
the same table that makes the CLI flags and checks the request, so an input is added in one place.

Each component runs the image's `generic-trainer` with the whole executor input (`{{$}}`) and the
executor-output path, so the runtime reads every input and output location from KFP's own JSON:

    command: [generic-trainer]
    args:    [VERB, --executor-input, {{$}}, --executor-output-file, {{$.outputs.output_file}}]
    (VERB: train, tune, evaluate, infra-validate, import-examples, transform or push)

`command` equals the image's ENTRYPOINT (images/trainer/Dockerfile), so the same container also
runs under `docker run IMAGE train ...` and as a Vertex AI custom job.

The image is one setting: `DEFAULT_IMAGE`, overridden by `$GENERIC_TRAINER_IMAGE` or by
`python -m components.build --image IMAGE` (which cloudbuild.yaml runs for the tag it pushes).
"""

from typing import Any

# The image the project publishes; cloudbuild.yaml recompiles the YAML for the image it builds.
DEFAULT_IMAGE = "ghcr.io/generic-trainer/trainer:latest"
IMAGE_ENV = "GENERIC_TRAINER_IMAGE"
ENTRYPOINT = "generic-trainer"  # generic_trainer.intake.kfp_component.ENTRYPOINT


def resolve_image(image: str | None = None) -> str:
    """The image to compile into the components: `image`, else $GENERIC_TRAINER_IMAGE, else
    DEFAULT_IMAGE."""
    import os

    return image or os.environ.get(IMAGE_ENV) or DEFAULT_IMAGE


def run_identity_args() -> list[str]:
    """`--run-id`/`--task-name` filled by KFP (see generic_trainer.intake.kfp_component)."""
    from generic_trainer.intake import kfp_component

    return kfp_component.run_identity_args()


def component(verb: Any, image: str | None = None) -> Any:
    """The KFP container component of `verb` (an options.Verb) for `image` (see resolve_image).

    Its inputs and outputs, their types, defaults and descriptions come from the verb's declaration
    (generic_trainer.intake.fit_options, judge_options, data_options): see
    generic_trainer/intake/options.py. The runtime builds the same component in-process
    (generic_trainer.intake.kfp_component), for the tfx-pipeline verb.
    """
    from generic_trainer.intake import kfp_component

    return kfp_component.component(verb, resolve_image(image))


def trainer_component(image: str | None = None) -> Any:
    """The trainer component (`generic-trainer train`) for `image` (see resolve_image)."""
    from generic_trainer.intake.fit_options import TRAIN

    return component(TRAIN, image)


def tuner_component(image: str | None = None) -> Any:
    """The tuner component (`generic-trainer tune`) for `image` (see resolve_image)."""
    from generic_trainer.intake.fit_options import TUNE

    return component(TUNE, image)


def evaluator_component(image: str | None = None) -> Any:
    """The evaluator component (`generic-trainer evaluate`) for `image` (see resolve_image)."""
    from generic_trainer.intake.judge_options import EVALUATE

    return component(EVALUATE, image)


def infra_validator_component(image: str | None = None) -> Any:
    """The infra-validator component (`generic-trainer infra-validate`) for `image` (see
    resolve_image)."""
    from generic_trainer.intake.judge_options import INFRA_VALIDATE

    return component(INFRA_VALIDATE, image)


def import_examples_component(image: str | None = None) -> Any:
    """The import-examples component (`generic-trainer import-examples`) for `image` (see
    resolve_image)."""
    from generic_trainer.intake.example_gen_options import IMPORT_EXAMPLES

    return component(IMPORT_EXAMPLES, image)


def transform_component(image: str | None = None) -> Any:
    """The transform component (`generic-trainer transform`) for `image` (see resolve_image)."""
    from generic_trainer.intake.transform_options import TRANSFORM

    return component(TRANSFORM, image)


def pusher_component(image: str | None = None) -> Any:
    """The pusher component (`generic-trainer push`) for `image` (see resolve_image)."""
    from generic_trainer.intake.push_options import PUSH

    return component(PUSH, image)


def bulk_inferrer_component(image: str | None = None) -> Any:
    """The bulk inferrer component (`generic-trainer bulk-infer`) for `image` (see
    resolve_image)."""
    from generic_trainer.intake.infer_options import BULK_INFER

    return component(BULK_INFER, image)


def resolver_component(image: str | None = None) -> Any:
    """The resolver component (`generic-trainer resolve`: TFX's Resolver with
    LatestBlessedModelStrategy) for `image` (see resolve_image)."""
    from generic_trainer.intake.resolve_options import RESOLVE

    return component(RESOLVE, image)
