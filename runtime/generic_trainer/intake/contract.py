"""The verb contract: the parts every verb module exports as `VERB`, and the one order a run
follows.

A verb (train, tune, evaluate, infra-validate, import-examples, transform, push, bulk-infer,
resolve, doctor, export-tflite, vertex-job, tfx-pipeline; a declaration without a `component` has
no KFP component, and its `kfp_outputs` are never called) is a `VerbContract`:

- `declaration`: its inputs, declared once (options.py): its flags, its KFP component, the request
  fields with a check, its output paths (checked writable first) and which raw value each KFP
  artifact fills (kfp_io);
- `build(values, environ, kfp) -> Request`: the frozen request, validated, every path absolute, the
  environment read there and nowhere below;
- `describe(request)`: the log lines that say what will run;
- `run(request, before_publish) -> Result`: the verb's work, light to import (TensorFlow, TFT, Beam
  and the cloud libraries load inside it);
- `kfp_outputs(request, result)`: the metadata of each output artifact and the output parameter
  values, for KFP's executor output; `summary(result)`: what is printed (None: nothing, e.g. on a
  worker replica); `keras(request)`: which Keras `tf.keras` means, decided before TensorFlow loads.

The one publish order, for every verb (cli.run_verb): request -> describe -> outputs checked
writable -> run, which computes the result, writes every output but the main one (metrics,
report, logs), then calls `before_publish(result)` -- the face writes KFP's executor output there,
on the replica that publishes -- and publishes its main output last (the model, the best
hyperparameters, the blessing, the Examples, the transform graph) -> print the summary.
Why this order: a published main output is what a later run or a pipeline step trusts as done;
writing the executor output first means a failure there (an unwritable output file, a value that
is not JSON) publishes nothing, so KFP's retry starts clean, and a main output is never left
published by a task KFP records as failed. Nothing runs after the publish but the summary (a
TFLite export that fails ends the run before it: nothing published, checkpoints kept).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Generic, Protocol, TypeVar

from generic_trainer.artifacts.kfp_io import KfpOutputs
from generic_trainer.intake.options import Verb

RequestT = TypeVar("RequestT")
ResultT = TypeVar("ResultT")
RequestT_co = TypeVar("RequestT_co", covariant=True)

# A raw value: a flag's (str, int, bool, list) or a KFP parameter's (any JSON value).
RawValues = Mapping[str, object]
# (metadata of each output artifact by name, output parameter values or None):
# kfp_io.write_executor_output's.
KfpOutputValues = tuple[Mapping[str, Mapping[str, object]], Mapping[str, object] | None]
# What the printed summary holds (JSON values).
Summary = dict[str, object]


class Build(Protocol[RequestT_co]):
    """A verb's request builder (the intake.*_request modules' build_*_request)."""

    def __call__(
        self,
        values: RawValues,
        environ: Mapping[str, str] | None = None,
        kfp: KfpOutputs | None = None,
    ) -> RequestT_co: ...


@dataclasses.dataclass(frozen=True)
class VerbContract(Generic[RequestT, ResultT]):
    """What a verb module exports as `VERB`; the CLI runs every verb through it (see the module
    docstring)."""

    declaration: Verb
    build: Build[RequestT]
    describe: Callable[[RequestT], list[str]]
    run: Callable[[RequestT, Callable[[ResultT], None] | None], ResultT]
    kfp_outputs: Callable[[RequestT, ResultT], KfpOutputValues]
    summary: Callable[[ResultT], Summary | None]
    keras: Callable[[RequestT], str] | None = (
        None  # None: Keras 3 unless TF_USE_LEGACY_KERAS says otherwise
    )
    # True: the face holds every output dir the declaration lists (outputs.exclusive_all: train's
    # output locks) for the whole run; False: the verb takes its own (train, tune, transform,
    # import-examples hold theirs in `run`).
    lock_outputs: bool = False

    @property
    def name(self) -> str:
        return self.declaration.name
