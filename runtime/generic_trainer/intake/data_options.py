"""The inputs of import-examples and the Beam group of the data verbs, each declared once: flag,
KFP component input, request check (transform's: transform_options.py).

See options.py for how each `Option` becomes a flag, a component input and a request field.
"""

from __future__ import annotations

from generic_trainer.intake.common_options import common_groups
from generic_trainer.intake.options import Component, Group, Option, Verb, artifact, output, value
from generic_trainer.intake.request import existing

BEAM = Group(
    "beam",
    (
        Option(
            "beam_pipeline_args",
            help=(
                "Beam pipeline options, passed through (give them after '=' in one quoted string, e.g. "
                "--beam-pipeline-args='--runner=DataflowRunner --project=P --region=R "
                "--temp_location=gs://B/tmp'); default: the DirectRunner here with one worker per CPU core"
            ),
            metavar="'ARGS'",
            action="append",
            param=value(
                list,
                (
                    'Beam options, e.g. ["--runner=DataflowRunner", "--project=P", "--region=R",\n'
                    '"--temp_location=gs://B/tmp"]; default: the DirectRunner in the container.'
                ),
                None,
            ),
        ),
    ),
)

IMPORT_EXAMPLES_INPUTS = Group(
    "inputs",
    (
        Option(
            "input",
            help="files to read, a glob (gs:// allowed), e.g. 'data/*.csv'",
            metavar="PATTERN",
            param=value(
                str,
                "Files to read, a glob (gs:// allowed). Give it or input_splits.",
                "",
                name="input_pattern",
            ),
        ),
        Option(
            "format",
            help=(
                "file format (default csv; CSV needs a header line; tfrecord: TFRecord files of "
                "tf.Example, gzipped or plain, as TFX's ImportExampleGen)"
            ),
            choices=("csv", "parquet", "tfrecord"),
            param=value(
                str,
                (
                    "csv (with a header line), parquet, or tfrecord (TFRecord files of tf.Example,\n"
                    "gzipped or plain, as TFX's ImportExampleGen reads)."
                ),
                "csv",
            ),
        ),
        Option(
            "schema",
            check=existing,
            help=(
                "tensorflow-metadata Schema giving each column's type; the columns must match its features "
                "(tfrecord: each record's features must be in it, with its types and fixed shapes)"
            ),
            metavar="FILE_OR_DIR",
            param=artifact(
                "Artifact",
                (
                    "tensorflow-metadata Schema giving each column's type; the columns must match its "
                    "features.\n"
                    "Without it types are inferred (INT, FLOAT or BYTES per column) and a feature with\n"
                    "the same number of values in every example gets that shape (SchemaGen's\n"
                    "infer_feature_shape=True)."
                ),
                None,
            ),
        ),
        Option(
            "splits",
            help="hash buckets per split (default train:2,eval:1, as TFX's CsvExampleGen)",
            metavar="name:buckets,...",
            param=value(
                str,
                (
                    'Hash buckets per split, in order: "train:2,eval:1" (the default; a record goes to the '
                    "split\n"
                    "whose bucket range holds SHA-256(record) mod the total, as in TFX's ExampleGen)."
                ),
                "train:2,eval:1",
            ),
        ),
        Option(
            "input_splits",
            help="one pattern per split instead of --input (no hashing)",
            metavar="name=PATTERN,...",
            param=value(
                dict,
                'One pattern per split instead of input_pattern, e.g. {"train": "gs://b/train/*.csv"}.',
                None,
            ),
        ),
    ),
)

IMPORT_EXAMPLES_OUTPUTS = Group(
    "outputs",
    (
        Option(
            "output",
            help="the Examples directory to create (must not exist, or be empty)",
            metavar="DIR",
            output="dir",
            param=output(
                "Dataset",
                (
                    "Examples in TFX layout: Split-<name>/data_tfrecord-*.gz (gzipped TFRecords of "
                    "tf.Example)\n"
                    "and schema.pbtxt; metadata: split_names, num_examples per split, feature_count."
                ),
                name="examples",
            ),
        ),
        Option(
            "schema_output",
            help="also write schema.pbtxt into this directory",
            metavar="DIR",
            output="dir",
            param=output(
                "Artifact",
                "Dir holding schema.pbtxt: the schema given, or the one inferred from the data.",
                name="output_schema",
            ),
        ),
    ),
)

IMPORT_EXAMPLES = Verb(
    "import-examples",
    help="CSV, Parquet or TFRecord files to TFX Examples (ExampleGen's layout), on Apache Beam",
    description="Read tables (encoding each row as a tf.Example, empty cells left out) or TFRecords of "
    "tf.Example, split the examples by a stable hash (or take one pattern per split), and write "
    "<output>/Split-<name>/*.gz plus <output>/schema.pbtxt (the schema given, or inferred: INT, "
    "FLOAT or BYTES per feature, and a fixed shape where every example has the same number of "
    "values).",
    component=Component(
        "generic_import_examples",
        "Imports CSV, Parquet or TFRecord files as TFX Examples on "
        "Apache Beam (TFX CsvExampleGen / ImportExampleGen layout).",
    ),
    groups=(
        IMPORT_EXAMPLES_INPUTS,
        IMPORT_EXAMPLES_OUTPUTS,
        BEAM,
        *common_groups(cluster_timeout=False, training=False),
    ),
)
