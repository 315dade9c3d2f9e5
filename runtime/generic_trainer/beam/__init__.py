"""What import-examples and transform build on: Beam pipeline options and runs (beam_run),
CSV/Parquet parsing (tabular), TFRecords of tf.Example (tfrecords) and schema inference for every
format (inference).
"""
