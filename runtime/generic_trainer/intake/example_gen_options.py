"""The inputs of import-examples (TFX's ExampleGen and SchemaGen on Beam), each declared once: flag,
KFP component input, request check.

See options.py for how each `Option` becomes a flag, a component input and a request field.
"""

from __future__ import annotations

from generic_trainer.intake.common_options import common_groups
from generic_trainer.intake.data_options import BEAM
from generic_trainer.intake.options import Component, Group, Option, Verb, artifact, output, value
from generic_trainer.intake.request import boolean, existing, one_of, text

PAYLOAD_FORMATS = ("FORMAT_TF_EXAMPLE", "FORMAT_TF_SEQUENCE_EXAMPLE")

IMPORT_EXAMPLES_INPUTS = Group(
    "inputs",
    (
        Option(
            "input",
            help=(
                "files to read: a glob (gs:// allowed), e.g. 'data/*.csv', or a folder (TFX's "
                "input_base: the files in it, or the base of --input-splits' patterns); "
                "{SPAN}, {VERSION} and {YYYY}{MM}{DD} select the latest span as TFX's ExampleGen"
            ),
            metavar="PATTERN_OR_DIR",
            param=value(
                str,
                (
                    "Files to read: a glob (gs:// allowed), or a folder (TFX's input_base: the "
                    "files\n"
                    "in it, or the base of input_splits' patterns). {SPAN}, {VERSION} and\n"
                    "{YYYY}{MM}{DD} in a pattern select the latest span and version, as TFX's "
                    "ExampleGen."
                ),
                "",
                name="input_pattern",
            ),
        ),
        Option(
            "range_config",
            help=(
                'TFX\'s RangeConfig as JSON: \'{"static_range": {"start_span_number": N, '
                '"end_span_number": N}}\' reads span N instead of the latest'
            ),
            metavar="JSON",
            param=value(
                dict,
                (
                    'TFX\'s RangeConfig, e.g. {"static_range": {"start_span_number": 3,\n'
                    '"end_span_number": 3}}: read that span instead of the latest.'
                ),
                None,
            ),
        ),
        Option(
            "payload_format",
            check=one_of(PAYLOAD_FORMATS, "FORMAT_TF_EXAMPLE"),
            choices=PAYLOAD_FORMATS,
            help=(
                "what the TFRecords hold (--format tfrecord; TFX's payload_format): "
                "FORMAT_TF_EXAMPLE (default) or FORMAT_TF_SEQUENCE_EXAMPLE"
            ),
            param=value(
                str,
                (
                    "What the TFRecords hold (format tfrecord): FORMAT_TF_EXAMPLE or\n"
                    "FORMAT_TF_SEQUENCE_EXAMPLE; recorded on the examples (TFX's payload_format)."
                ),
                "FORMAT_TF_EXAMPLE",
            ),
        ),
        Option(
            "format",
            help=(
                "file format (default csv; CSV needs a header line; tfrecord: TFRecord files of "
                "tf.Example or tf.SequenceExample, gzipped or plain, as TFX's ImportExampleGen)"
            ),
            choices=("csv", "parquet", "tfrecord"),
            param=value(
                str,
                (
                    "csv (with a header line), parquet, or tfrecord (TFRecord files of "
                    "tf.Example,\n"
                    "gzipped or plain, as TFX's ImportExampleGen reads)."
                ),
                "csv",
            ),
        ),
        Option(
            "schema",
            check=existing,
            help=(
                "tensorflow-metadata Schema giving each column's type; the columns must match its "
                "features "
                "(tfrecord: each record's features must be in it, with its types and fixed shapes)"
            ),
            metavar="FILE_OR_DIR",
            param=artifact(
                "Artifact",
                (
                    "tensorflow-metadata Schema giving each column's type; the columns must match "
                    "its "
                    "features.\n"
                    "Without it types are inferred (INT, FLOAT or BYTES per column) and a feature "
                    "with\n"
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
                    'Hash buckets per split, in order: "train:2,eval:1" (the default; a record '
                    "goes to the "
                    "split\n"
                    "whose bucket range holds SHA-256(record) mod the total, as in TFX's "
                    "ExampleGen)."
                ),
                "train:2,eval:1",
            ),
        ),
        Option(
            "partition_feature",
            check=text(None),
            help=(
                "split by the hash of this feature's value instead of the whole record (TFX's "
                "partition_feature_name; an int64 or bytes feature every record holds)"
            ),
            metavar="NAME",
            param=value(
                str,
                (
                    "Split by the hash of this feature's value instead of the whole record (TFX's\n"
                    "output_config.split_config.partition_feature_name); empty: the record."
                ),
                "",
            ),
        ),
        Option(
            "infer_feature_shape",
            check=boolean(True),
            help=(
                "true (default): a feature with the same number of values in every example gets "
                "that shape; false: no shapes, every feature read sparse (SchemaGen's "
                "infer_feature_shape)"
            ),
            metavar="true|false",
            param=value(
                bool,
                (
                    "SchemaGen's infer_feature_shape for the inferred schema: false gives no "
                    "feature\n"
                    "a shape (TFX's modules then read every feature sparse)."
                ),
                True,
            ),
        ),
        Option(
            "input_splits",
            help=(
                "one pattern per split (no hashing); with --input DIR the patterns are relative "
                "to it (TFX's input_config)"
            ),
            metavar="name=PATTERN,...",
            param=value(
                dict,
                'One pattern per split instead of input_pattern, e.g. {"train": '
                '"gs://b/train/*.csv"}.',
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
                    "and schema.pbtxt; metadata: split_names, num_examples per split, "
                    "feature_count."
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
    description="Read tables (encoding each row as a tf.Example, empty cells left out) or "
    "TFRecords of "
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
