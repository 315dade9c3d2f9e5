"""Where the runners get this image's components: handed in by the tfx-pipeline verb.

The components are built in-process from the verbs' declarations (intake/kfp_component.py, the
same function `python -m components.build` compiles the checked-in YAML with), for any image; the
verbs' layer hands the builder in with `using`, since this layer cannot import it. A runner used
outside the verb (no builder handed in) stops with a message saying how to run the file.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from generic_trainer.errors import UserInputError

# image -> {component name (steps.COMPONENTS) -> kfp component}
Builder = Callable[[str], Mapping[str, Any]]

_BUILDER: contextvars.ContextVar[Builder | None] = contextvars.ContextVar(
    "tfx_kfp_components", default=None
)


@contextlib.contextmanager
def using(builder: Builder) -> Iterator[None]:
    """Within the block, runners build their components with `builder`.

    Args:
      builder: image -> component name -> kfp component.

    Yields:
      Nothing.
    """
    token = _BUILDER.set(builder)
    try:
        yield
    finally:
        _BUILDER.reset(token)


def components_for(image: str) -> Mapping[str, Any]:
    """This image's components for `image`.

    Args:
      image: the container image the components run.

    Returns:
      Component name -> kfp component.

    Raises:
      UserInputError: no builder was handed in (the file was not run by the tfx-pipeline verb).
    """
    builder = _BUILDER.get()
    if builder is None:
        raise UserInputError(
            "runner",
            "TFX's runners here run under `generic-trainer tfx-pipeline run FILE [ARGS...]`",
        )
    return builder(image)
