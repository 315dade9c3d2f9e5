"""The generic-trainer components as pipelines use them: loaded from the checked-in YAML, or
compiled for an image."""

from __future__ import annotations

import os
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINER_YAML = os.path.join(REPO, "components", "trainer", "component.yaml")
TUNER_YAML = os.path.join(REPO, "components", "tuner", "component.yaml")
EVALUATOR_YAML = os.path.join(REPO, "components", "evaluator", "component.yaml")
INFRA_VALIDATOR_YAML = os.path.join(REPO, "components", "infra_validator", "component.yaml")
IMPORT_EXAMPLES_YAML = os.path.join(REPO, "components", "import_examples", "component.yaml")
TRANSFORM_YAML = os.path.join(REPO, "components", "transform", "component.yaml")
PUSHER_YAML = os.path.join(REPO, "components", "pusher", "component.yaml")


def trainer(image: str | None = None) -> Any:
    """The trainer component: the checked-in YAML, or (with `image`) compiled for that image."""
    if image:
        from components import specs

        return specs.trainer_component(image)
    from kfp import components

    return components.load_component_from_file(TRAINER_YAML)


def tuner(image: str | None = None) -> Any:
    """The tuner component: the checked-in YAML, or (with `image`) compiled for that image."""
    if image:
        from components import specs

        return specs.tuner_component(image)
    from kfp import components

    return components.load_component_from_file(TUNER_YAML)


def evaluator(image: str | None = None) -> Any:
    """The evaluator component: the checked-in YAML, or (with `image`) compiled for that image."""
    if image:
        from components import specs

        return specs.evaluator_component(image)
    from kfp import components

    return components.load_component_from_file(EVALUATOR_YAML)


def infra_validator(image: str | None = None) -> Any:
    """The infra-validator component: the checked-in YAML, or (with `image`) compiled for that
    image."""
    if image:
        from components import specs

        return specs.infra_validator_component(image)
    from kfp import components

    return components.load_component_from_file(INFRA_VALIDATOR_YAML)


def import_examples(image: str | None = None) -> Any:
    """The import-examples component: the checked-in YAML, or (with `image`) compiled for that
    image."""
    if image:
        from components import specs

        return specs.import_examples_component(image)
    from kfp import components

    return components.load_component_from_file(IMPORT_EXAMPLES_YAML)


def transform(image: str | None = None) -> Any:
    """The transform component: the checked-in YAML, or (with `image`) compiled for that image."""
    if image:
        from components import specs

        return specs.transform_component(image)
    from kfp import components

    return components.load_component_from_file(TRANSFORM_YAML)


def pusher(image: str | None = None) -> Any:
    """The pusher component: the checked-in YAML, or (with `image`) compiled for that image."""
    if image:
        from components import specs

        return specs.pusher_component(image)
    from kfp import components

    return components.load_component_from_file(PUSHER_YAML)
