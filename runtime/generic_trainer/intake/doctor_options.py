"""The inputs of `doctor`: train's flags (so `train` in a command line can be replaced by `doctor`),
and its own.

train's options are taken as they are declared (fit_options.TRAIN), without their component
parameters, request checks or output roles: doctor has no KFP component, reports a bad value instead
of stopping on it, and writes nothing where train's outputs would go.
"""

from __future__ import annotations

import dataclasses

from generic_trainer.intake.fit_options import TRAIN
from generic_trainer.intake.options import Group, Option, Verb

DOCTOR_OWN = Group(
    "doctor",
    (
        Option("json", action="store_true", help="print the checks as one JSON object"),
        Option(
            "site_packages",
            metavar="DIR",
            help="where the CUDA libraries TensorFlow opens are looked for (default: the "
            "site-packages TensorFlow is installed in)",
        ),
    ),
)


def _as_read(group: Group) -> Group:
    """train's group with its flags only (no component input, request check or output role)."""
    options = tuple(
        dataclasses.replace(o, param=None, check=None, output=None, published=False)
        for o in group.options
        if o.cli
    )
    return dataclasses.replace(group, options=options)


# (flag dest, flag) of train's inputs a train run reads: its input artifacts and its module.
TRAIN_INPUTS = tuple(
    (o.name, o.flag)
    for o in TRAIN.options()
    if o.cli and (o.name == "module_file" or (o.param is not None and o.param.kind == "input"))
)
# (flag dest, flag, "dir" | "file") of train's outputs.
TRAIN_OUTPUTS = tuple((o.name, o.flag, o.output) for o in TRAIN.options() if o.cli and o.output)

DOCTOR = Verb(
    "doctor",
    help="check what train would find on this machine, without training",
    description="Print, one line each (ok / warn / fail, with the fix), what `train` with "
    "the same flags would find here: the Python, TensorFlow, Keras and CUDA versions, the "
    "tf.keras of the module, the GPUs the machine shows and those TensorFlow registers, every "
    "CUDA library that does not load, XLA on each GPU, the strategy and the cluster, whether "
    "each gs:// / s3:// input can be listed, memory and disk where the outputs go. Nothing is "
    "trained or written. Exit 0 when nothing fails, 2 otherwise.",
    groups=(DOCTOR_OWN, *(_as_read(g) for g in TRAIN.groups)),
)
