"""Train-output assembly: a trained model staged, validated and published whole with its extras.

Above `intake/` (it reads the whole TrainRequest) and below the train verbs (`train.py`, the
run_fn path, and `train_task.py`, the Task path), which both publish through `publisher`.
"""
