"""The Keras 2 idiom module as a TFX module is written: it imports tfx_bsl, so `--keras auto` gives
it tf_keras."""

from idiom_base import run_fn  # noqa: F401 - the run_fn the runtime calls
from tfx_bsl.public import tfxio  # noqa: F401 - as TFX modules import it
