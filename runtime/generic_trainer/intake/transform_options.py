"""The inputs of transform (tf.Transform on Beam, TFX's Transform), each declared once: flag, KFP
component input, request check.

See options.py for how each `Option` becomes a flag, a component input and a request field.
"""

from __future__ import annotations

from generic_trainer.intake.common_options import common_groups
from generic_trainer.intake.data_options import BEAM
from generic_trainer.intake.evaluate_outputs import records_dir
from generic_trainer.intake.options import Component, Group, Option, Verb, artifact, output, value
from generic_trainer.intake.request import sha256, splits, text

TRANSFORM_INPUTS = Group(
    "inputs",
    (
        Option(
            "examples",
            help=(
                "raw examples in TFX layout: DIR/Split-<name>/*.gz (gs:// allowed); several "
                "Examples dirs (spans, as TFX's resolved examples) as DIR,DIR,..."
            ),
            metavar="DIR[,DIR...]",
            param=artifact("Dataset", "Raw examples in TFX layout: Split-<name>/*.gz."),
        ),
        Option(
            "more_examples",
            cli=False,
            param=value(
                list,
                "Further Examples dirs (URIs: the spans a resolver gave besides `examples`), "
                "analyzed\n"
                "and transformed with it; with analyzer_cache, the spans it saw are not analyzed "
                "again.",
                None,
            ),
        ),
        Option(
            "schema",
            help="the raw examples' tensorflow-metadata Schema",
            metavar="FILE_OR_DIR",
            param=artifact(
                "Artifact",
                "The raw examples' tensorflow-metadata Schema (schema.pbtxt or a dir holding one).",
            ),
        ),
        Option(
            "module_file",
            help="user module: a .py file, a gs:// URI, or a dotted module name",
            metavar="PATH_OR_URI",
            param=value(
                str,
                "The user module: a .py path, a gs:// URI, or a dotted module name in the image.",
            ),
        ),
        Option(
            "preprocessing_fn",
            check=text("preprocessing_fn"),
            help="function to call (default preprocessing_fn)",
            metavar="NAME",
            param=value(str, "The function to call in the module.", "preprocessing_fn"),
        ),
        Option(
            "module_sha256",
            check=sha256,
            help="refuse to run a module file whose sha256 differs",
            metavar="HEX",
            param=value(
                str, "Refuse to run a module file whose sha256 differs (empty: no check).", ""
            ),
        ),
        Option(
            "custom_config",
            help="JSON object bound to preprocessing_fn(inputs, custom_config) when it takes it",
            metavar="JSON",
            param=value(
                dict,
                "JSON object bound to preprocessing_fn's custom_config argument when it has one\n"
                "(as TFX's Transform binds it; integral numbers arrive as ints).",
                None,
            ),
        ),
        Option(
            "analyze_splits",
            check=splits(("train",)),
            help="splits the analyzers see (default train)",
            metavar="a,b",
            param=value(list, 'Splits the analyzers see (default ["train"]).', None),
        ),
        Option(
            "transform_splits",
            check=splits(()),
            help="splits to transform (default: every split of the examples, as TFX)",
            metavar="a,b",
            param=value(list, "Splits to transform (default: every split of the examples).", None),
        ),
        Option(
            "analyzer_cache",
            help=(
                "tf.Transform analyzer cache of an earlier run (its --updated-analyzer-cache): "
                "the analyze splits it saw are not analyzed again"
            ),
            metavar="DIR",
            param=artifact(
                "Artifact",
                "tf.Transform analyzer cache of an earlier run (TFX's analyzer_cache input): the\n"
                "analyze splits of the examples it saw are not read or analyzed again.",
                None,
            ),
        ),
    ),
)

TRANSFORM_OUTPUTS = Group(
    "outputs",
    (
        Option(
            "transform_graph",
            help="the transform graph to create (TFTransformOutput dir)",
            metavar="DIR",
            output="dir",
            param=output(
                "Artifact",
                (
                    "tf.Transform output (transform_fn/, transformed_metadata/, metadata/), the\n"
                    "trainer's transform_graph; metadata: analyze_splits, feature_count, "
                    "raw_feature_count."
                ),
            ),
        ),
        Option(
            "transformed_examples",
            help="also write the transformed examples here",
            metavar="DIR",
            output="dir",
            param=output(
                "Dataset",
                (
                    "The transformed examples in TFX layout "
                    "(Split-<name>/transformed_examples-*.gz);\n"
                    "metadata: split_names, num_examples per split, feature_count."
                ),
            ),
        ),
        Option(
            "updated_analyzer_cache",
            help="also write the analyzer cache here, for the next run's --analyzer-cache",
            metavar="DIR",
            output="dir",
            param=output(
                "Artifact",
                "tf.Transform analyzer cache of this run (TFX's updated_analyzer_cache), for the\n"
                "next run's analyzer_cache; metadata: dataset_keys, cached_datasets.",
            ),
        ),
        Option(
            "records_dir",
            check=records_dir,
            help="record the updated analyzer cache here for a later run's resolve "
            "(TFX's LatestArtifactStrategy of TransformCache); default: no record",
            metavar="DIR",
            param=value(
                str,
                "Record the updated analyzer cache here for a later run's resolver (the\n"
                "tfx-pipeline verb sets <pipeline_root>/generic-trainer-records/<name>).",
                None,
            ),
        ),
    ),
)

TRANSFORM = Verb(
    "transform",
    help="tf.Transform: analyze and transform examples with a module's preprocessing_fn (TFX "
    "Transform), on Apache Beam",
    description="Run the module's preprocessing_fn with tensorflow-transform: analyze the analyze "
    "splits, write "
    "the transform graph (transform_fn/, transformed_metadata/, metadata/) and, when asked, the "
    "transformed examples (Split-<name>/transformed_examples-*.gz), as TFX's Transform does.",
    component=Component(
        "generic_transform",
        "Runs a module's preprocessing_fn with tensorflow-transform on Apache "
        "Beam (TFX Transform compatible).",
    ),
    groups=(
        TRANSFORM_INPUTS,
        TRANSFORM_OUTPUTS,
        BEAM,
        *common_groups(cluster_timeout=False, training=False),
    ),
)
