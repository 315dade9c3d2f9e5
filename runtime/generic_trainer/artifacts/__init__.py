"""Where outputs go: storage (local, gs://), KFP executor output, staged atomic publishing, result
files, reports, the model artifact's extras and serving container, and redaction of secrets.
"""
