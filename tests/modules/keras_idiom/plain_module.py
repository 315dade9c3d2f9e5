"""The Keras 2 idiom module without any TFX import: `--keras auto` gives it Keras 3."""

from idiom_base import run_fn  # noqa: F401 - the run_fn the runtime calls
