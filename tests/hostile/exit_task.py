"""Hostile: a Task (the regression LinearTask of tests/task_modules) whose build_model calls
sys.exit(5)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "task_modules"))

from linear_task import LinearTask  # noqa: E402


class ExitingTask(LinearTask):
    def build_model(self):
        sys.exit(5)
