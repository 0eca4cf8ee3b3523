"""Where the clock service runs: as an async Ray actor whose runs live in the worker pool's hosts
(:class:`ClockActor`, :func:`clock_actor_class`; ``EmuCluster.clock``), or in-process with its runs'
participants as plain objects (:func:`local_service`, :class:`LocalLauncher`, :func:`run_in_process`;
tests and benchmarks, no Ray).

A *launcher* starts and drops a run's participants: the pool's
:class:`~raytestbed.emu.pool.PoolLauncher` in the actor, :class:`LocalLauncher` in-process.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from raytestbed.core.cluster import Cluster
from raytestbed.emu.clock_service import DEFAULT_REPLAY_PAYLOAD, ClockService
from raytestbed.emu.executors.worker import ParamServer, StageWorker
from raytestbed.emu.fastforward import FastForward
from raytestbed.emu.hostlink import ClockLink
from raytestbed.emu.pool import PoolLauncher
from raytestbed.emu.run import Run
from raytestbed.errors import ServerLostError


class LocalLauncher:
    """Runs' participants as in-process objects (tests, and the clock actor with ``emu.workers: clock``):
    one in-process "host" whose :class:`~raytestbed.emu.hostlink.ClockLink` calls the clock service directly."""

    HOST = "local"  #: the one host's name at the clock

    def __init__(self, service_ref: Callable[[], ClockService] | None = None) -> None:
        self._service = service_ref
        self.link: ClockLink | None = None
        self.objects: dict[tuple, list] = {}
        self.tasks: dict[tuple, list] = {}
        self._lost_gpus: set[int] = set()
        self._lost_servers: set[int] = set()

    def link_of(self, host) -> ClockLink | None:
        """Where the clock sends host ``host``'s wake-ups."""
        return self.link if host == self.HOST else None

    async def launch(self, run: Run, start_s: float) -> list:
        for spec in run.plan.workers:
            if spec.gpu in self._lost_gpus:
                raise ServerLostError(f"server of GPU {spec.gpu} was lost")
        for p in run.plan.ps:
            if p.server in self._lost_servers:
                raise ServerLostError(f"server {p.server} was lost")
        if self.link is None:
            self.link = ClockLink(self._service(), self.HOST)
        clock = self.link
        workers = [StageWorker(spec, clock, (run.run_id, "w", spec.rank), start_s) for spec in run.plan.workers]
        ps = [ParamServer(p, clock, (run.run_id, "ps", p.index), start_s, run.monitor.iterations)
              for p in run.plan.ps]
        peers = {spec.gpu: w for spec, w in zip(run.plan.workers, workers)}
        for w in workers:
            w.connect(peers, ps)
        for p in ps:
            p.connect(peers)
        self.objects[run.run_id] = workers + ps
        tasks = [asyncio.ensure_future(o.run()) for o in workers + ps]
        self.tasks[run.run_id] = tasks
        return tasks

    def lose_server(self, server: int, gpus) -> None:
        """Never launch on ``server`` again (its runs fail at the clock)."""
        self._lost_servers.add(server)
        self._lost_gpus.update(gpus)

    def drop(self, run: Run) -> None:
        for t in self.tasks.pop(run.run_id, []):
            if not t.done():
                t.cancel()
        self.objects.pop(run.run_id, None)
        if self.link is not None:
            self.link.forget(run.run_id)


def local_service(cluster: Cluster, **kw) -> ClockService:
    """A :class:`ClockService` whose runs are in-process objects (no Ray)."""
    holder: list[ClockService] = []
    svc = ClockService(cluster, launcher=LocalLauncher(lambda: holder[0]), **kw)
    holder.append(svc)
    return svc


def run_in_process(cluster: Cluster, jobs, policies, faults=(), *, fast_forward: FastForward | None = None,
                   mode: str = "replay", replay_payload_bytes: int | None = DEFAULT_REPLAY_PAYLOAD,
                   timeout_s: float | None = None, **trial) -> tuple[dict, list, list, ClockService]:
    """A whole trial on the emulator's clock service with in-process workers (no Ray: the same clock,
    fabric, scheduler and worker programs on one asyncio loop; tests and benchmarks).

    ``trial``: more arguments of :meth:`ClockService.begin_trial` (``speeds``, ``restore_s``, ...);
    ``timeout_s``: wall seconds after which it stops with an AssertionError (None: no limit).
    Returns (:meth:`ClockService.result`, every event delivered, every decision batch, the service)."""
    import asyncio

    async def main():
        svc = local_service(cluster, fast_forward=fast_forward or FastForward(),
                            replay_payload_bytes=replay_payload_bytes)
        await svc.begin_trial(jobs, policies, faults, mode=mode, **trial)
        events: list = []
        decisions: list = []
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        while True:
            batch = await svc.poll(1.0)
            events += batch.events
            decisions += batch.decisions
            if batch.done:
                break
            assert timeout_s is None or loop.time() - t0 < timeout_s, "in-process emulated trial did not end"
        res = await svc.result()
        svc._loop_task.cancel()
        return res, events, decisions, svc

    return asyncio.run(main())


class ClockActor(ClockService):
    """:class:`ClockService` as an async Ray actor whose runs live in the worker pool's hosts.

    Create with :func:`clock_actor_class` (``EmuCluster`` does): ``gpu_hosts`` / ``server_hosts``
    map every emulated GPU / server to its host actor; both None (``emu.workers: clock``): the runs'
    participants are plain objects in this actor's process (:class:`LocalLauncher`), so steps and
    wake-ups are method calls on its own event loop."""

    def __init__(self, cluster: Cluster, gpu_hosts: dict | None, server_hosts: dict | None, nic_share: str = "fair",
                 fast_forward: FastForward | None = None, pace: float | None = None,
                 watchdog_s: float = 120.0, replay_payload_bytes: int | None = DEFAULT_REPLAY_PAYLOAD) -> None:
        import ray  # in the actor's process, where Ray runs anyway (this module imports without Ray)

        if gpu_hosts is None:  # emu.workers: clock -- the runs' participants are objects in this process
            launcher = LocalLauncher(lambda: self)
        else:
            launcher = PoolLauncher(gpu_hosts, server_hosts, ray.get_runtime_context().current_actor)
        super().__init__(cluster, launcher, nic_share=nic_share,
                         fast_forward=fast_forward, pace=pace, watchdog_s=watchdog_s,
                         replay_payload_bytes=replay_payload_bytes)

    async def lose_server(self, server: int) -> None:
        """``server`` was killed (or died): never launch there again; its runs fail now."""
        self.launcher.lose_server(server, self.cluster.gpus_of(server))
        await self.server_lost(server)

    async def pid(self) -> int:
        return os.getpid()


def clock_actor_class():
    """:class:`ClockActor` as a Ray actor class (imports Ray on first use)."""
    import ray  # Ray imports in 3.8 s (python -X importtime, 2-core host at load 20): only when a cluster starts

    return ray.remote(num_cpus=0)(ClockActor)
