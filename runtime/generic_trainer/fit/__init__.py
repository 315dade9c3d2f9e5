"""What runs a user's fit: the examples and FnArgs, the cluster and strategy, multi-worker Keras,
the user module and its imports, checkpoints and backups, preemption, Keras hooks and progress
lines.

The train and tune verbs and the Task API build on this layer; nothing here imports a verb.
"""
