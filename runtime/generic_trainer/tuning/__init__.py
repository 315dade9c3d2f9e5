"""What the tune verb builds on: the keras-tuner cluster (chief oracle, workers) and the trial log.
"""
