"""The Keras 2 idiom module, written as TFX modules are: it imports tfx_bsl (--keras auto)."""

from idiom_base import run_fn  # noqa: F401 - the run_fn the runtime calls
from tfx_bsl.public import tfxio  # noqa: F401 - as TFX modules import it
