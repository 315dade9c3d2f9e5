"""Examples on disk, shared by every verb that reads them: finding the split files, reading
TFRecords, schemas and parse specs, checks of bad records, and the tf.data pipeline.
"""
