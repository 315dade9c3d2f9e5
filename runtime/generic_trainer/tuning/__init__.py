"""What the tune verb builds on: the keras-tuner cluster (chief oracle, workers), the trial log, and
the search's result as the verb reports it (tune_result.py: tuner_results.json, metrics, the HTML
report).
"""
