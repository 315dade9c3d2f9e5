"""Errors the runtime reports to the user, each with its exit code.

Every failure a user can fix ends as one of these: the CLI prints the message (no internal
traceback) and exits with the code, so a KFP or Vertex log shows what to change.
"""

from __future__ import annotations

from generic_trainer.log_text import shown

EXIT_USER_INPUT = 2
EXIT_USER_CODE = 3
EXIT_BAD_OUTPUT = 4
EXIT_CLUSTER = 5
EXIT_PREEMPTED = 143  # 128 + SIGTERM: the job should be restarted and will resume.


class TrainerError(Exception):
    """Base class: a failure with a message meant for the user and an exit code."""

    exit_code = 1


class UserInputError(TrainerError):
    """An input (flag, file, parameter, environment variable) is missing or malformed.

    `input_name` names the input as the user wrote it (``--examples``, ``custom_config``).
    """

    exit_code = EXIT_USER_INPUT

    def __init__(self, input_name: str, message: str):
        self.input_name = input_name
        super().__init__(shown(f"{input_name}: {message}"))  # one line, whatever a path holds


class UserCodeError(TrainerError):
    """The user's module raised, or returned something the runtime cannot use."""

    exit_code = EXIT_USER_CODE
    multiline = True  # its message may hold the user code's traceback: logged as it is


class OutputError(TrainerError):
    """The user's code ran but left outputs that cannot be published (no model, no signature)."""

    exit_code = EXIT_BAD_OUTPUT


class ClusterError(TrainerError):
    """The cluster could not be formed (a peer never came up) or lost a member."""

    exit_code = EXIT_CLUSTER


class Preempted(TrainerError):
    """SIGTERM arrived: a checkpoint was saved and the job should be restarted."""

    exit_code = EXIT_PREEMPTED
