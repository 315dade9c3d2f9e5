"""Hostile: run_fn ends in ways no `except` sees, or fails in ways that are hard to report.
custom_config {"do": ...}:
- "os_exit": os._exit(0) before any model is written (the process "succeeds");
- "kill_self": SIGKILL to its own process (as the out-of-memory killer would);
- "child": writes a good model, then leaves `sleep` running with the log pipes open;
- "secret": raises RuntimeError(f"auth failed for token {custom_config['api_token']}");
- "bad_str": raises an exception whose __str__ raises;
- "base_exception": raises a BaseException subclass that is not an Exception;
- "close_fds": writes a good model, then closes fds 1 and 2;
- "forge_end": writes the run record's completion entry itself (exit code 0), then os._exit(0).
"""

import os
import signal
import subprocess

import tiny_serving


class BadStr(Exception):
    def __str__(self):
        raise ValueError("no message for you")


class NotAnException(BaseException):
    pass


def run_fn(fn_args):
    do = fn_args.custom_config["do"]
    if do == "os_exit":
        os._exit(0)
    if do == "forge_end":
        from generic_trainer.artifacts import run_record

        run_record.note("end", 0, closed=[])
        os._exit(0)
    if do == "kill_self":
        os.kill(os.getpid(), signal.SIGKILL)
    if do == "secret":
        raise RuntimeError(f"auth failed for token {fn_args.custom_config['api_token']}")
    if do == "bad_str":
        raise BadStr()
    if do == "base_exception":
        raise NotAnException("stop everything")
    tiny_serving.save(fn_args.serving_model_dir)
    if do == "child":
        sleeper = subprocess.Popen(
            ["sleep", "1000"]
        )  # inherits stdout and stderr: `| cat` would wait for it
        with open(os.path.join(fn_args.custom_config["pid_dir"], "sleeper.pid"), "w") as f:
            f.write(str(sleeper.pid))
    if do == "close_fds":
        os.close(1)
        os.close(2)
