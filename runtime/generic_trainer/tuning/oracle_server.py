"""The chief's oracle server with a deadline on silent workers, and the workers' heartbeats.

`OracleServer` serves keras-tuner's oracle over gRPC from a thread of the chief and notes when it
last heard from each worker; `Heartbeat` is what a worker sends while a trial runs. Who serves and
the KERASTUNER_* variables are `tuner_cluster.py`'s. keras-tuner and gRPC load only when serving.
"""

from __future__ import annotations

import logging
import threading
import time

from generic_trainer.errors import ClusterError, TrainerError
from generic_trainer.tuning.tuner_cluster import TunerRole

log = logging.getLogger(__name__)


class OracleServer:
    """The chief's gRPC server for the oracle, with a deadline on silent workers.

    `start()` serves in the background; `check()` raises once a worker holding a trial has been
    silent past the timeout (a watcher thread logs it as soon as it happens); `wait_for_workers()`
    returns when every worker has finished its trials and been told the search is over.
    """

    def __init__(self, oracle, role: TunerRole, worker_timeout: float, state_dir: str):
        self.oracle = oracle
        self.role = role
        self.timeout = worker_timeout
        self.state_dir = state_dir
        self.started = time.monotonic()
        self.last_seen: dict[str, float] = {}
        self.stopped: set[str] = set()  # tuners told the search is over
        self.failure: TrainerError | None = None
        self._server = None
        self._done = threading.Event()
        self._lock = threading.Lock()

    # -- contacts ------------------------------------------------------------------------------
    def seen(self, tuner: str | None) -> None:
        """Note a contact from worker `tuner` (its first is logged)."""
        if tuner:
            with self._lock:
                if tuner not in self.last_seen:
                    log.info("worker %s connected to the oracle", tuner)
                self.last_seen[tuner] = time.monotonic()

    def tuner_of_trial(self, trial_id: str) -> str | None:
        """The worker running trial `trial_id` (None: none)."""
        for tuner, trial in list(self.oracle.ongoing_trials.items()):
            if trial.trial_id == trial_id:
                return tuner
        return None

    def fail(self, error: TrainerError) -> None:
        """Record the search's first failure (logged), which ends it."""
        if self.failure is None:
            self.failure = error
            log.error("%s", error)

    # -- serving -------------------------------------------------------------------------------
    def start(self) -> OracleServer:
        """Serve the oracle at the role's address and watch the workers' deadlines.

        Returns:
          This server.

        Raises:
          ClusterError: the address cannot be served.
        """
        from concurrent import futures

        import grpc
        from keras_tuner.src import protos

        servicer = _servicer_class()(self.oracle, self)
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=len(self.role.remote_tuner_ids) + 2)
        )
        protos.get_service_grpc().add_OracleServicer_to_server(servicer, self._server)
        address = self.role.bind_address
        try:
            bound = self._server.add_insecure_port(address)
        except RuntimeError:
            bound = 0
        if not bound:
            raise ClusterError(
                f"cannot serve the tuner oracle at {address} (port in use or address not local)"
            )
        self._server.start()
        log.info(
            "serving the tuner oracle at %s for workers %s (worker timeout %g s)",
            address,
            ", ".join(self.role.remote_tuner_ids),
            self.timeout,
        )
        threading.Thread(target=self._watch, name="oracle-watch", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving and watching."""
        self._done.set()
        if self._server is not None:
            self._server.stop(grace=2).wait(5)
            self._server = None

    # -- deadlines -----------------------------------------------------------------------------
    def _silence(self, tuner: str, now: float) -> float:
        return now - self.last_seen.get(tuner, self.started)

    def _gone(self, now: float) -> ClusterError | None:
        """A ClusterError when a remote worker holding a trial has been silent past the deadline."""
        for tuner, trial in list(self.oracle.ongoing_trials.items()):
            if tuner == self.role.tuner_id:
                continue
            silent = self._silence(tuner, now)
            if silent > self.timeout:
                return ClusterError(
                    f"worker {tuner} has not been heard from for {silent:.0f} s while running "
                    f"trial {trial.trial_id} (--worker-timeout {self.timeout:g} s): giving up the "
                    "search instead of waiting forever. The search state is saved in "
                    f"{self.state_dir}: run the same job again to resume (completed trials are "
                    "kept, the unfinished one is retried)."
                )
        return None

    def _watch(self) -> None:
        while not self._done.wait(1.0):
            error = self._gone(time.monotonic())
            if error is not None:
                self.fail(error)
                return

    def check(self) -> None:
        """Raise the failure the server saw (a gone worker, or a fatal error in the oracle)."""
        if self.failure is not None:
            raise self.failure
        error = self._gone(time.monotonic())
        if error is not None:
            self.fail(error)
            raise error

    def wait_for_workers(self, poll_s: float = 0.5, report_every_s: float = 30.0) -> None:
        """After the chief's own trials: wait until no trial runs and every worker was told to stop.

        A worker that never connected or went silent without holding a trial is waited for only
        until the deadline; then it is noted and the search (complete without it) ends.
        """
        last_report = time.monotonic()
        while True:
            self.check()
            now = time.monotonic()
            running = {t: trial.trial_id for t, trial in list(self.oracle.ongoing_trials.items())}
            pending = [t for t in self.role.remote_tuner_ids if t not in self.stopped]
            waiting = [t for t in pending if t in running or self._silence(t, now) <= self.timeout]
            if not running and not waiting:
                for t in pending:
                    log.warning(
                        "worker %s %s within --worker-timeout %g s; the search is complete without "
                        "it",
                        t,
                        "never connected" if t not in self.last_seen else "did not check out",
                        self.timeout,
                    )
                return
            if now - last_report >= report_every_s:
                last_report = now
                log.info(
                    "waiting for workers: %s",
                    ", ".join(
                        f"{t} (trial {running[t]})"
                        if t in running
                        else f"{t} (not yet told to stop)"
                        for t in waiting
                    ),
                )
            time.sleep(poll_s)


def _servicer_class():
    """keras-tuner's OracleServicer, noting each contact (and who was told to stop) on the
    OracleServer."""
    from keras_tuner.src import protos
    from keras_tuner.src.distribute.oracle_chief import OracleServicer
    from keras_tuner.src.engine import trial as trial_module

    class WatchedServicer(OracleServicer):
        def __init__(self, oracle, server: OracleServer):
            super().__init__(oracle)
            self.server = server

        def CreateTrial(self, request, context):  # noqa: N802 - gRPC's names
            self.server.seen(request.tuner_id)
            trial = self.oracle.create_trial(request.tuner_id)
            if trial.status == trial_module.TrialStatus.STOPPED:
                self.stop_triggered = True
                self.server.stopped.add(request.tuner_id)
            return protos.get_service().CreateTrialResponse(trial=trial.to_proto())

        def UpdateTrial(self, request, context):  # noqa: N802
            self.server.seen(self.server.tuner_of_trial(request.trial_id))
            return super().UpdateTrial(request, context)

        def EndTrial(self, request, context):  # noqa: N802
            self.server.seen(self.server.tuner_of_trial(request.trial.trial_id))
            return super().EndTrial(request, context)

        def GetTrial(self, request, context):  # noqa: N802 - also the workers' heartbeat
            self.server.seen(self.server.tuner_of_trial(request.trial_id))
            return super().GetTrial(request, context)

    return WatchedServicer


class Heartbeat:
    """A worker's sign of life while a trial runs: asks the oracle for its trial every
    `interval_s`."""

    def __init__(self, host: str, port: int, interval_s: float):
        self.address = f"{host}:{port}"
        self.interval_s = interval_s
        self.trial_id: str | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Heartbeat:
        self._thread = threading.Thread(target=self._beat, name="tuner-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _beat(self) -> None:
        import grpc
        from keras_tuner.src import protos

        with grpc.insecure_channel(self.address) as channel:
            stub = protos.get_service_grpc().OracleStub(channel)
            while not self._done.wait(self.interval_s):
                trial_id = self.trial_id
                if trial_id is None:
                    continue
                try:
                    stub.GetTrial(
                        protos.get_service().GetTrialRequest(trial_id=trial_id),
                        timeout=self.interval_s,
                    )
                except grpc.RpcError as e:
                    log.warning("heartbeat to the oracle at %s failed: %s", self.address, e.code())


def heartbeat_interval(worker_timeout: float) -> float:
    """Often enough that a few missed beats are not mistaken for a gone worker."""
    return max(0.5, min(10.0, worker_timeout / 4))
