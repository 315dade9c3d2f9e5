"""train's serving, TFLite and speed groups, declared once; fit_options.py puts them in train's
declaration (see options.py).
"""

from __future__ import annotations

import argparse

from generic_trainer.fit.accelerator import ACCELERATORS
from generic_trainer.intake.fit_input_options import MODEL_FORMATS, model_format
from generic_trainer.intake.options import (
    Group,
    Option,
    value,
)
from generic_trainer.intake.request import (
    one_of,
)

TRAIN_SERVING = Group(
    "serving",
    description="the container Vertex AI Model Registry serves the model with (KFP metadata)",
    options=(
        Option(
            "serving_image",
            help="serving container image (default: Vertex's prebuilt TF Serving image for this "
            "TensorFlow)",
            metavar="IMAGE",
            param=value(
                str,
                (
                    "The serving container the model artifact names for Vertex AI Model Registry "
                    "(its\n"
                    "containerSpec metadata); empty: Vertex's prebuilt TF Serving image for the "
                    "TensorFlow version."
                ),
                "",
            ),
        ),
        Option(
            "model_format",
            check=model_format,
            help=(
                "savedmodel (default: run_fn must export a SavedModel with serving_default, "
                "checked); other: publish what run_fn wrote (a scikit-learn model.pkl, ...) "
                "unchecked"
            ),
            choices=MODEL_FORMATS,
            param=value(
                str,
                "savedmodel (run_fn's SavedModel is checked for serving_default) or other (what\n"
                "run_fn wrote to serving_model_dir is published whole, unchecked: TFX's "
                "scikit-learn\n"
                "module's model.pkl).",
                "savedmodel",
            ),
        ),
        Option(
            "serving_accelerator",
            help="prebuilt image variant (default cpu)",
            choices=("cpu", "gpu"),
            param=value(str, "cpu or gpu: which prebuilt image (tf2-cpu or tf2-gpu).", "cpu"),
        ),
        Option(
            "serving_image_region",
            help="multi-region of the prebuilt image (default us)",
            choices=("us", "europe", "asia"),
            param=value(str, "us, europe or asia: the prebuilt image's multi-region.", "us"),
        ),
    ),
)

TRAIN_TFLITE = Group(
    "TFLite",
    description="also write <model-dir>/Format-TFLite/model.tflite, checked against the "
    "SavedModel on the eval examples",
    options=(
        Option(
            "export_tflite",
            help=(
                "convert serving_default to TFLite (chief only; a model that cannot convert ends "
                "the run with exit 4, publishing nothing and keeping the checkpoints for a retry)"
            ),
            action=argparse.BooleanOptionalAction,
            param=value(
                bool,
                (
                    "Also write <model>/Format-TFLite/model.tflite (TFLite built-in ops), checked "
                    "against the\n"
                    "SavedModel on the eval examples; the model's metadata records its size, "
                    "quantization and "
                    "the\nlargest output difference. A model that cannot convert fails the task "
                    "and publishes "
                    "nothing;\nthe checkpoints are kept, so a retry resumes from them."
                ),
                False,
            ),
        ),
        Option(
            "tflite_quantization",
            help="post-training quantization (default none)",
            choices=("none", "dynamic", "float16"),
            param=value(
                str,
                "none, dynamic or float16 (post-training quantization of the TFLite model).",
                "none",
            ),
        ),
        Option(
            "tflite_tolerance",
            help=(
                "largest absolute output difference from the SavedModel accepted (default 1e-4 for "
                "none, 0.05 for float16, 0.1 for dynamic)"
            ),
            metavar="X",
            param=value(
                float,
                (
                    "Largest absolute output difference from the SavedModel accepted; unset: 1e-4 "
                    "for\nnone, 0.05 for float16, 0.1 for dynamic."
                ),
                None,
            ),
        ),
    ),
)

CACHE_CHOICES = ("auto", "memory", "off")  # records/example_dataset.py's cache modes
ACCELERATOR_CHECK = one_of(ACCELERATORS, "auto")
ACCELERATOR_PARAM = value(
    str,
    (
        "auto: every GPU of the machine, failing before training when TensorFlow cannot use\n"
        "them; gpu: fail without one; cpu: train on the CPU on purpose."
    ),
    "auto",
)

TRAIN_SPEED = Group(
    "speed",
    description="applied to every model.compile in the module that does not set them itself",
    options=(
        Option(
            "mixed_precision",
            help="Keras global dtype policy while run_fn runs: compute in 16 bits, variables in "
            "float32",
            choices=("mixed_float16", "mixed_bfloat16"),
            param=value(
                str,
                (
                    "Keras global dtype policy while run_fn runs: mixed_float16 or mixed_bfloat16 "
                    "(empty:\nthe module's own)."
                ),
                "",
            ),
        ),
        Option(
            "jit_compile",
            help=(
                "compile train/eval steps with XLA, or not (model.compile(jit_compile=...)); "
                "default: Keras' auto (off on CPU and under a tf.distribute strategy)"
            ),
            action=argparse.BooleanOptionalAction,
            param=value(
                bool,
                "Compile train/eval steps with XLA (model.compile(jit_compile=...)); unset: Keras' "
                "default.",
                None,
            ),
        ),
        Option(
            "cache_examples",
            check=one_of(CACHE_CHOICES, "auto"),
            choices=CACHE_CHOICES,
            help=(
                "keep the decompressed records of the data accessor's datasets in memory after the "
                "first epoch (auto: when they fit, see the docs; memory: always; off: never)"
            ),
            param=value(
                str,
                (
                    "auto, memory or off: keep the data accessor's decompressed records in memory "
                    "after\nthe first epoch (auto: when they fit)."
                ),
                "auto",
            ),
        ),
        Option(
            "steps_per_execution",
            help=(
                "batches run per tf.function call (model.compile(steps_per_execution=N)); "
                "callbacks then see every N-th batch"
            ),
            metavar="N",
            param=value(
                int,
                "Batches per tf.function call (model.compile(steps_per_execution=N)); 0: "
                "the\nmodule's own.",
                0,
            ),
        ),
    ),
)
