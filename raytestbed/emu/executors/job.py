"""Start a placed job on the emulated cluster and follow it: :func:`start_job` / :class:`JobRun`.

``start_job`` runs one :class:`~raytestbed.emu.executors.worker.StageWorker` per
stage replica on its emulated GPU's Ray node, the PS tasks of a parameter-server
job and a :class:`JobMonitor`, from a background thread, and returns at once.
With the EmuCluster's worker pool (default; :mod:`raytestbed.emu.pool`) these are
objects created by RPC inside long-lived host actors (the GPU's host, the PS
server's ServerActor, the monitor host) under a fresh run key, and dropped when
the run ends; with ``worker_pool=False`` (or an EmuCluster without a pool) each
is a new actor (workers placed with ``emu.worker_options(gpu)``), killed when
the run ends. The monitor turns the workers' per-mini-batch records into one
report per iteration, in emulated seconds:

* ``iter_s`` - time between the completions of iterations i-1 and i (the last
  worker to finish the mini-batch's backward, all-reduce and step; the first
  iteration counts from the start, so it includes filling the pipeline);
* ``compute_s`` / ``comm_s`` - the largest compute and communication time of
  any worker for that mini-batch (communication = holding the GPU for inbound
  flows, paced outbound flows, all-reduce or PS push/pull).

Reporter calls (``reporter`` is a Ray actor handle or None):
``on_iteration(job_id, iteration, iter_s, compute_s, comm_s, end_wall)`` per iteration,
``on_job_done(job_id, iterations_done, end_wall)`` when all requested iterations are done
(not after :meth:`JobRun.stop`: the caller gets the count from ``stop()``),
``on_job_failed(job_id, reason)`` when a worker died or a server of the job was
lost, and ``on_warning(job_id, message)`` (only if the reporter has that
method) when real-compute workers outnumber the host's cores.

Iteration numbers reported are ``start_iteration + j`` for the j-th iteration
of this run; ``iterations`` is how many this run performs. ``end_wall`` is when
the iteration (or the run) ended on the workers' logical clocks, as a wall
timestamp (``time.time()`` seconds): the scheduler stamps its events with it
instead of the (later) time the report reaches it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings

import ray

from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.emu.executors.plan import JobPlan, plan_job
from raytestbed.emu.executors.worker import ParamServer, StageWorker
from raytestbed.emu.fabric import MAX_BACKDATE_WALL_S
from raytestbed.emu.pool import RunProxy, new_run_key
from raytestbed.errors import ConfigError

log = logging.getLogger(__name__)

_REAL_LOCK = threading.Lock()
_REAL_WORKERS: dict[int, int] = {}  # id(JobRun) -> real-compute workers alive (this process)


def real_workers_running() -> int:
    """Real-compute workers of the jobs started from this process and not finished yet."""
    with _REAL_LOCK:
        return sum(_REAL_WORKERS.values())


def _call(reporter, method: str, *args) -> None:
    if reporter is None:
        return
    m = getattr(reporter, method, None)
    if m is None:
        return
    if hasattr(m, "remote"):
        m.remote(*args)
    else:
        m(*args)


class JobMonitor:
    """Collects per-mini-batch records of all workers and reports whole iterations (sync actor: ordered)."""

    def __init__(self, job_id: int, n_workers: int, reporter, factor: float, start_iteration: int) -> None:
        self.job_id = job_id
        self.n = n_workers
        self.reporter = reporter
        self.factor = factor
        self.start_iteration = start_iteration
        self.t0: float | None = None
        self.pending: dict[int, dict[int, tuple]] = {}
        self.next = 0
        self.last_end = 0.0
        self.rows: list[dict] = []

    def started(self, t0_wall: float) -> None:
        self.t0 = t0_wall
        self.last_end = t0_wall

    def record(self, j: int, rank: int, t_end: float, comp: float, comm: float, loss, n: int, cpu: float) -> None:
        self.pending.setdefault(j, {})[rank] = (t_end, comp, comm, loss, n, cpu)
        while len(self.pending.get(self.next, ())) == self.n:
            recs = self.pending.pop(self.next).values()
            end = max(r[0] for r in recs)
            losses = [(r[3], r[4]) for r in recs if r[3] is not None]
            row = {
                "iteration": self.start_iteration + self.next,
                "iter_s": (end - self.last_end) * self.factor,
                "compute_s": max(r[1] for r in recs),
                "comm_s": max(r[2] for r in recs),
                "loss": (sum(l * n for l, n in losses) / max(1, sum(n for _, n in losses))) if losses else None,
                "cpu_s": max(r[5] for r in recs),
                "end_emu_s": (end - (self.t0 or end)) * self.factor,
            }
            self.last_end = end
            self.rows.append(row)
            _call(self.reporter, "on_iteration", self.job_id, row["iteration"], row["iter_s"], row["compute_s"],
                  row["comm_s"], end)
            self.next += 1

    def finish(self, iterations_done: int | None, failure: str | None, send_done: bool) -> list[dict]:
        if failure is not None:
            _call(self.reporter, "on_job_failed", self.job_id, failure)
        elif send_done:
            _call(self.reporter, "on_job_done", self.job_id, iterations_done, self.last_end)
        return list(self.rows)

    def records(self) -> list[dict]:
        return list(self.rows)


class JobRun:
    """A running job; created by :func:`start_job`.

    Attributes:
        job_id, plan: the job and what its workers do.
        iterations_done: iterations completed (set when the run ended).
        failure: the reason if it failed, else None.
        oversubscribed: real-compute workers outnumbered ``os.cpu_count()`` at start.
        warnings: messages about the run (oversubscription).
        pool: the EmuCluster's worker pool this run uses, or None (per-job actors).
        run_key: the run's key in the pool's hosts (None without the pool).
        hosts: with the pool, the host actor of each worker (``workers`` are then RunProxy objects).
    """

    def __init__(self, emu, job: Job, placement: Placement, plan: JobPlan, reporter, pool=None,
                 start_s: float | None = None) -> None:
        self.emu = emu
        self.pool = pool
        self.run_key = new_run_key(job.job_id) if pool is not None else None
        self.hosts: list = []
        self._ps_hosts: list = []
        self.job = job
        self.job_id = job.job_id
        self.placement = placement
        self.plan = plan
        self.reporter = reporter
        self.factor = float(emu.time_scale.to_emu(1.0))
        #: the job's start on the emulated clock: the decision's time ``start_s`` if given (else when
        #: start_job was called), no earlier than MAX_BACKDATE_WALL_S wall before now. Every worker's
        #: logical clock starts here, so the decision-to-launch latency and the start skew between
        #: the gang's workers are back-dated like any control-plane delay (worker.py, "Logical clock").
        self.start_s = _start_time(emu.time_scale, start_s)
        self.iterations_done: int | None = None
        self.failure: str | None = None
        self.oversubscribed = False
        self.warnings: list[str] = []
        self._rows: list[dict] | None = None
        self._stopped = False
        self._ready = threading.Event()
        self._finished = threading.Event()
        self._lock = threading.Lock()
        self.workers: list = []
        self.ps: list = []
        self.monitor = None
        self._servers = set(placement.servers(emu.cluster)) | set(placement.ps_servers)
        n_real = len(plan.workers) if plan.mode == "real" else 0
        if n_real:
            with _REAL_LOCK:
                _REAL_WORKERS[id(self)] = n_real
                total = sum(_REAL_WORKERS.values())
            cores = os.cpu_count() or 1
            if total > cores:
                msg = (f"job {self.job_id}: {total} real-compute workers on a host with {cores} cores: "
                       f"compute times are inflated by CPU sharing (use mode 'replay' or fewer GPUs)")
                self.oversubscribed = True
                self.warnings.append(msg)
                log.warning(msg)
                warnings.warn(msg, RuntimeWarning, stacklevel=3)
                _call(reporter, "on_warning", self.job_id, msg)
        self._thread = threading.Thread(target=self._main, name=f"job{self.job_id}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ public
    def done(self) -> bool:
        """True once the run ended (completed, stopped or failed)."""
        return self._finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run ended (or ``timeout`` wall seconds passed); returns :meth:`done`."""
        return self._finished.wait(timeout)

    def stop(self) -> int:
        """Preempt: finish the mini-batches already started, start no new ones; returns iterations done."""
        self._stopped = True
        self._ready.wait()
        if not self._finished.is_set() and self.failure is None:
            try:
                stage0 = [w for spec, w in zip(self.plan.workers, self.workers) if spec.stage == 0]
                started = ray.get([w.freeze.remote() for w in stage0])
                limit = max(started) if started else 0
                ray.get([w.set_limit.remote(limit) for w in self.workers])
            except Exception as e:  # a worker died meanwhile: the watcher reports it
                log.info("job %s: stop while failing: %s", self.job_id, e)
        self._finished.wait()
        return self.iterations_done or 0

    def records(self) -> list[dict]:
        """Per-iteration rows (iteration, iter_s, compute_s, comm_s, loss, cpu_s, end_emu_s; emulated s)."""
        if self._rows is not None:
            return list(self._rows)
        if self.monitor is None:
            return []
        return ray.get(self.monitor.records.remote()) or []  # pooled: [] before the monitor exists

    def losses(self) -> list[float]:
        """Training loss of every iteration (real mode; mean over the whole global batch)."""
        return [r["loss"] for r in self.records() if r["loss"] is not None]

    # ------------------------------------------------------------------ internals
    def _main(self) -> None:
        try:
            self._launch()
        except Exception as e:  # could not even start
            self._end(None, f"start failed: {type(e).__name__}: {e}")
            return
        finally:
            self._ready.set()
        self._watch()

    def _launch(self) -> None:
        if self.pool is not None:
            self._launch_pooled()
            return
        plan, emu = self.plan, self.emu
        self.monitor = ray.remote(JobMonitor).options(num_cpus=0).remote(
            self.job_id, len(plan.workers), self.reporter, self.factor,
            plan.workers[0].start_iteration if plan.workers else 0)
        WorkerActor = ray.remote(StageWorker)
        PsActor = ray.remote(ParamServer)
        for spec in plan.workers:
            opts = {"num_cpus": 0, **emu.worker_options(spec.gpu)}
            self.workers.append(WorkerActor.options(**opts).remote(spec, emu.fabric, self.monitor, emu.time_scale))
        for ps in plan.ps:
            opts = {"num_cpus": 0, **_server_options(emu, ps.server, ps.gpu)}
            self.ps.append(PsActor.options(**opts).remote(ps, emu.fabric))
        peers = {spec.gpu: w for spec, w in zip(plan.workers, self.workers)}
        ray.get([w.connect.remote(peers, self.ps) for w in self.workers])
        self._run_workers()

    def _launch_pooled(self) -> None:
        """Create the run's objects in the pool's hosts (one message per host, in parallel), then run."""
        plan, pool = self.plan, self.pool
        key = self.run_key
        self.monitor = RunProxy(pool.monitor, key, "monitor")
        mon_args = (self.job_id, len(plan.workers), self.reporter, self.factor,
                    plan.workers[0].start_iteration if plan.workers else 0)
        for attempt in (0, 1):
            self.hosts = [pool.host(spec.gpu) for spec in plan.workers]
            self._ps_hosts = [pool.ps_host(ps.server) for ps in plan.ps]
            self.workers = [RunProxy(h, key, spec.gpu) for spec, h in zip(plan.workers, self.hosts)]
            self.ps = [RunProxy(h, key, ("ps", ps.index)) for ps, h in zip(plan.ps, self._ps_hosts)]
            peers = {spec.gpu: w for spec, w in zip(plan.workers, self.workers)}
            items: dict[int, tuple] = {}  # id(host) -> (host, items)
            for spec, h in zip(plan.workers, self.hosts):
                items.setdefault(id(h), (h, []))[1].append(
                    (spec.gpu, StageWorker, (spec, self.emu.fabric, self.monitor, self.emu.time_scale),
                     [("connect", (peers, self.ps))]))
            for ps, h in zip(plan.ps, self._ps_hosts):
                items.setdefault(id(h), (h, []))[1].append((("ps", ps.index), ParamServer, (ps, self.emu.fabric), []))
            refs = [pool.monitor.create.remote(key, "monitor", JobMonitor, *mon_args)]
            refs += [h.setup.remote(key, its) for h, its in items.values()]
            try:
                ray.get(refs)
                break
            except ray.exceptions.RayActorError:
                # a host died by itself (its server still alive: else ServerLostError) -> replace it, once
                if attempt or not pool.heal([spec.gpu for spec in plan.workers]):
                    raise
        self._run_workers()

    def _run_workers(self) -> None:
        """Start every worker's loop with the job's start as their common logical start."""
        ts = self.emu.time_scale
        ray.get(self.monitor.started.remote(ts.epoch + ts.to_wall(self.start_s)))
        self._refs = [w.run.remote(self.start_s) for w in self.workers]

    def _watch(self) -> None:
        pending = list(self._refs)
        done: list[int] = []
        last_check = time.monotonic()
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=0.2)
            for r in ready:
                try:
                    done.append(int(ray.get(r)))
                except Exception as e:
                    self._end(None, f"worker failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                    return
            if time.monotonic() - last_check > 0.5 and hasattr(self.emu, "alive_servers"):
                last_check = time.monotonic()
                try:
                    lost = self._servers - set(self.emu.alive_servers())
                except Exception:  # the cluster is shutting down
                    lost = set()
                if lost:
                    self._end(None, f"server {min(lost)} lost")
                    return
        self._end(min(done) if done else 0, None)

    def _end(self, iterations: int | None, failure: str | None) -> None:
        with self._lock:
            if self._finished.is_set():
                return
            self.failure = failure
            self.iterations_done = iterations if failure is None else None
            if self.pool is not None:
                # drop the run's objects in the hosts (cancels its calls); the hosts live on
                for h in {id(h): h for h in self.hosts + self._ps_hosts}.values():
                    try:
                        h.drop.remote(self.run_key)
                    except Exception:
                        pass
            else:
                for a in self.workers + self.ps:
                    try:
                        ray.kill(a)
                    except Exception:
                        pass
            if self.monitor is not None:
                try:
                    self._rows = ray.get(self.monitor.finish.remote(iterations, failure, not self._stopped),
                                         timeout=30)
                except Exception:
                    self._rows = []
                    if failure is not None:
                        _call(self.reporter, "on_job_failed", self.job_id, failure)
                try:
                    if self.pool is not None:
                        self.pool.monitor.drop.remote(self.run_key)
                    else:
                        ray.kill(self.monitor)
                except Exception:
                    pass
            elif failure is not None:
                _call(self.reporter, "on_job_failed", self.job_id, failure)
            if failure is not None and self.iterations_done is None:
                self.iterations_done = len(self._rows or [])
            with _REAL_LOCK:
                _REAL_WORKERS.pop(id(self), None)
            self._finished.set()


def _start_time(time_scale, start_s: float | None) -> float:
    """A run's logical start (emulated s): ``start_s`` clamped to [now - MAX_BACKDATE_WALL_S wall, now]."""
    now = float(time_scale.now())
    if start_s is None:
        return now
    return min(now, max(float(start_s), now - time_scale.to_emu(MAX_BACKDATE_WALL_S)))


def _server_options(emu, server: int, gpu: int) -> dict:
    """Actor options for a PS task on ``server``: the server's placement, without taking its GPU."""
    fn = getattr(emu, "server_options", None)
    if fn is not None:
        return fn(server)
    return {}


def start_job(emu, job: Job, placement: Placement, *, iterations: int, mode: str = "replay", reporter=None,
              start_iteration: int = 0, profile=None, worker_pool: bool | None = None,
              start_s: float | None = None) -> JobRun:
    """Start ``job`` on ``placement`` for ``iterations`` iterations; returns at once (see module docstring).

    Args:
        emu: an EmuCluster (``cluster``, ``time_scale``, ``fabric``, ``worker_options``).
        mode: ``replay`` (hold each emulated GPU for the profiled times) or ``real``
            (run the zoo model's layers; needs ``job.model`` to be a zoo preset).
        profile: the job model's per-layer profile (default: the shipped one).
        worker_pool: None = use ``emu.pool`` if the EmuCluster has one; True = require it;
            False = create per-job actors (the behaviour without the pool).
        start_s: when the job was decided, on the fabric's emulated clock (``emu.time_scale``);
            the run's logical clock starts there (at most ``MAX_BACKDATE_WALL_S`` wall ago).
            None: now.

    Raises:
        ConfigError: bad mode, a model real mode cannot build, stages that match
            no layer range of the model.
    """
    if getattr(emu, "mode", "paced") != "paced":
        raise ConfigError(f"job {job.job_id}: the executors need the paced fabric (emulator mode 'paced'), "
                          f"got {emu.mode!r}")
    if profile is None and mode == "real":
        from raytestbed.core.profile import default_profiles

        profile = default_profiles().get(job.model)
    pool = getattr(emu, "pool", None)
    if worker_pool and pool is None:
        raise ConfigError(f"job {job.job_id}: worker_pool=True but the EmuCluster was started without a worker pool")
    if worker_pool is False:
        pool = None
    plan = plan_job(job, placement, emu.cluster, iterations=iterations, mode=mode,
                    start_iteration=start_iteration, profile=profile)
    return JobRun(emu, job, placement, plan, reporter, pool=pool, start_s=start_s)
