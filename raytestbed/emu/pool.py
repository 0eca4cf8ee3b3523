"""The worker pool: long-lived host actors that run the jobs' workers as plain objects.

Creating a Ray actor starts a worker process: ~1 s on a quiet 2-core host, 3-30 s under load
(docs/emulator.md, "Worker pool"). Without the pool every (re)start of a job pays that per stage
replica, on the trial clock. With the pool, :class:`~raytestbed.emu.cluster.EmuCluster` starts,
before any trial clock runs,

* one :class:`RunHost` per GPU group (``gpus_per_actor`` GPUs, default 1 = one per emulated GPU),
  placed in that group's placement-group bundle — the node and bundle ``worker_options(gpu)``
  places a per-job worker in, without taking the ``emu_gpu`` resource (so per-job actors can
  still be placed there: ``start_job(..., worker_pool=False)``); it dies with its server;
The parameter-server tasks of a run live in the :class:`~raytestbed.emu.server.ServerActor` of
their server (a :class:`RunHost` too), so they die with it as well.

Starting a run then only sends RPCs (:class:`PoolLauncher`, used by the clock actor): each host
creates the run's objects (``StageWorker``, ``ParamServer``) keyed by ``(run_key, name)``; the objects talk to each other through :class:`RunProxy` objects, which look
like actor handles (``proxy.deliver.remote(...)``) and call ``host.call.remote(run_key, name,
"deliver", ...)``. Every call runs as a task registered under its run key, and
:meth:`RunHost.drop` cancels them and forgets the objects: preemption kills no process, and a
late message of an old run finds no object under its key (every run has a new key) and is
dropped.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from raytestbed.emu.executors.worker import ParamServer, StageWorker
from raytestbed.emu.hostlink import ClockLink
from raytestbed.errors import ConfigError, ServerLostError

log = logging.getLogger(__name__)

#: calls that are silently dropped when their object is gone (late messages of a finished run)
QUIET = frozenset({"deliver", "push", "record", "records"})


def new_run_key(job_id: int) -> tuple[int, str]:
    """A run key unique across runs, restarts and driver processes: ``(job_id, random hex)``."""
    return (int(job_id), uuid.uuid4().hex[:12])


#: the RunHost of this process, by its Ray actor id (hex); a RunProxy to it calls it directly
_HOSTS_HERE: dict[str, "RunHost"] = {}


def host_key(handle) -> str | None:
    """A Ray actor handle's actor id (hex): the name of a host at the clock and in :data:`_HOSTS_HERE`."""
    aid = getattr(handle, "_actor_id", None)
    return None if aid is None else aid.hex()


def _this_actor_id() -> str | None:
    """The Ray actor id of this process's actor (None outside a Ray actor)."""
    import sys

    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    try:
        return ray.get_runtime_context().get_actor_id()
    except Exception:  # not in an actor
        return None


class _Method:
    __slots__ = ("_proxy", "_name")

    def __init__(self, proxy: "RunProxy", name: str) -> None:
        self._proxy, self._name = proxy, name

    def remote(self, *args):
        p = self._proxy
        here = p._here()
        if here is not None:  # same process: a plain call, no serialisation, no Ray task
            return asyncio.ensure_future(here.call_here(*p._lead, self._name, *args))
        return p._handle.call.remote(*p._lead, self._name, *args)


class RunProxy:
    """Stands in for an actor handle of object ``name`` of run ``run_key`` inside host ``handle``:
    ``proxy.m.remote(*args)`` is ``handle.call.remote(run_key, name, "m", *args)``, or, used from the
    host process itself, the same call made directly (an asyncio task; the run-key semantics are
    the same: a dropped run's late message is dropped). Picklable."""

    def __init__(self, handle, run_key, name) -> None:
        self._handle = handle
        self._lead = (run_key, name)
        self._local: list | None = None  # [the RunHost of this process it stands for, or None], once looked up

    def __getstate__(self) -> dict:
        return {"_handle": self._handle, "_lead": self._lead}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._local = None

    def _here(self) -> "RunHost | None":
        if self._local is None:
            key = host_key(self._handle)
            self._local = [_HOSTS_HERE.get(key) if key is not None else None]
        return self._local[0]

    @property
    def host(self):
        return self._handle

    def __getattr__(self, method: str) -> _Method:
        if method.startswith("_"):
            raise AttributeError(method)
        return _Method(self, method)

    def __repr__(self) -> str:
        return f"RunProxy{self._lead}"


class RunHost:
    """Async host of run objects (see the module docstring). Subclassed by ServerActor.

    ``create(run_key, name, cls, *args)`` builds ``cls(*args)``; ``call(run_key, name, method,
    *args)`` runs (and awaits, if a coroutine) ``obj.method(*args)`` as a task of the run;
    ``drop(run_key)`` cancels the run's tasks and forgets its objects.
    """

    def _host_init(self) -> None:
        if not hasattr(self, "_objs"):
            self._objs: dict = {}
            self._tasks: dict = {}
            self._link: ClockLink | None = None
            self.calls_in = 0  # calls that came through Ray (call), not from this process (call_here)
            key = _this_actor_id()
            if key is not None:
                _HOSTS_HERE[key] = self
                self._key = key

    def __init__(self, label: str = "") -> None:
        self.label = label
        self._host_init()

    async def ping(self) -> str:
        return getattr(self, "label", "")

    async def create(self, run_key, name, cls, *args) -> bool:
        self._host_init()
        self._objs[(run_key, name)] = cls(*args)
        return True

    async def setup(self, run_key, items: list, clock=None) -> int:
        """Create several objects of a run and make their first calls, in one message:
        ``items`` = ``[(name, cls, args, [(method, args), ...]), ...]``; returns objects created.
        ``clock``: the clock actor's handle; the objects step on this host's
        :class:`~raytestbed.emu.hostlink.ClockLink` to it instead (their ``clock``)."""
        self._host_init()
        if clock is not None and self._link is None:
            self._link = ClockLink(clock, getattr(self, "_key", None))
        for name, cls, args, calls in items:
            obj = self._objs[(run_key, name)] = cls(*args)
            if clock is not None:
                obj.clock = self._link
            for method, margs in calls:
                res = getattr(obj, method)(*margs)
                if asyncio.iscoroutine(res):
                    await res
        return len(items)

    async def wake_many(self, wakes: list) -> int:
        """The clock's wake-ups for this host's participants (:meth:`ClockLink.wake_many`)."""
        return self._link.wake_many(wakes) if self._link is not None else 0

    async def call(self, run_key, name, method: str, *args):
        """``obj.method(*args)`` of the run's object ``name`` (a call through Ray)."""
        self._host_init()
        self.calls_in += 1
        return await self.call_here(run_key, name, method, *args)

    async def call_here(self, run_key, name, method: str, *args):
        """:meth:`call` from this process (a :class:`RunProxy` to an object here)."""
        obj = self._objs.get((run_key, name))
        if obj is None:
            if method in QUIET:
                return None
            raise LookupError(f"run {run_key}: no object {name!r} on this host (run dropped?)")
        res = getattr(obj, method)(*args)
        if not asyncio.iscoroutine(res):
            return res
        task = asyncio.ensure_future(res)
        tasks = self._tasks.setdefault(run_key, set())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        try:
            return await task
        except asyncio.CancelledError:
            if task.cancelled():  # dropped; not this call itself being cancelled
                return None
            raise

    async def drop(self, run_key) -> int:
        """Cancel the run's calls in progress and forget its objects; returns objects dropped."""
        self._host_init()
        for task in list(self._tasks.pop(run_key, ())):
            task.cancel()
        if self._link is not None:
            self._link.forget(run_key)
        gone = [k for k in self._objs if k[0] == run_key]
        for k in gone:
            del self._objs[k]
        return len(gone)

    async def preload(self, modules: list[str]) -> list[str]:
        """Import ``modules`` now (before a trial clock runs) instead of at the first run."""
        import importlib

        return [importlib.import_module(m).__name__ for m in modules]

    async def runs(self) -> list:
        """Run keys with objects on this host (for tests and diagnostics)."""
        self._host_init()
        return sorted({k[0] for k in self._objs}, key=repr)

    async def stats(self) -> dict:
        """Messages of this host: ``calls_in`` (calls to its objects through Ray), ``clock_messages``
        (step messages sent to the clock) and ``clock_items`` (steps and leaves they carried)."""
        self._host_init()
        link = self._link
        return {"calls_in": self.calls_in, "clock_messages": link.messages if link else 0,
                "clock_items": link.items if link else 0}

    async def pid(self) -> int:
        import os

        return os.getpid()


class WorkerPool:
    """The pool of an EmuCluster: host actors started at once (see the module docstring).

    The GPU hosts import the executors' worker code (``WORKER_MODULES``) when the pool starts, so
    the first job start does not.

    Args:
        emu: the EmuCluster (its placement groups, ServerActors and ``bundle_options``).
        ready_timeout_s: wall seconds to wait for every host to answer.
    """

    WORKER_MODULES = ("raytestbed.emu.executors.worker",)

    def __init__(self, emu, ready_timeout_s: float) -> None:
        import ray


        self.emu = emu
        self._host_cls = ray.remote(num_cpus=0)(RunHost)
        self._gpu_host: dict[int, object] = {}
        self.hosts: list = []
        for grp in emu.gpu_groups:
            h = self._spawn(grp)
            for g in grp:
                self._gpu_host[g] = h
        # the executors' code is imported now, not at the first job start (torch only for real compute:
        # see preload_real_compute)
        pings = [h.preload.remote(list(self.WORKER_MODULES)) for h in self.hosts]
        _, late = ray.wait(pings, num_returns=len(pings), timeout=ready_timeout_s)
        if late:
            raise ConfigError(
                f"emulator: {len(late)} of {len(pings)} worker-pool actors did not start within {ready_timeout_s:g} s "
                f"(host overloaded?); raise ready_timeout_s, emulate fewer GPUs, raise gpus_per_actor, or "
                f"run without the pool (worker_pool=False)")
        ray.get(pings)

    def preload_real_compute(self, timeout_s: float = 300.0) -> None:
        """Import torch and the real-compute stage code in every GPU host now (``compute: real``
        trials call this before the clock starts; ~170 MB and seconds per host)."""
        import ray

        ray.get([h.preload.remote(["raytestbed.emu.executors.compute"]) for h in self.hosts], timeout=timeout_s)

    def _spawn(self, grp: tuple[int, ...]):
        h = self._host_cls.options(max_concurrency=100_000, **self.emu.bundle_options(grp[0])).remote(
            f"gpus {','.join(map(str, grp))}")
        self.hosts.append(h)
        return h

    @property
    def processes(self) -> int:
        """Host processes of the pool (one per GPU group)."""
        return len(self.emu.gpu_groups)

    def host(self, gpu: int):
        """The host actor of emulated GPU ``gpu``; raises ServerLostError if its server was lost."""
        self.emu.bundle_options(gpu)  # raises for GPUs of lost servers
        return self._gpu_host[gpu]

    def ps_host(self, server: int):
        """The host of PS tasks on ``server``: its ServerActor."""
        if server not in self.emu.alive_servers():
            raise ServerLostError(f"emulator: server {server} was lost")
        return self.emu.server_actor(server)

    def shutdown(self) -> None:
        import ray

        for a in self.hosts:
            try:
                ray.kill(a, no_restart=True)
            except Exception:
                pass


class PoolLauncher:
    """Starts and drops runs' participants in the worker pool's hosts (for the clock actor).

    Args:
        gpu_hosts: the host actor of every emulated GPU.
        server_hosts: the ServerActor of every server (hosts of PS tasks).
        clock: the clock actor's handle (the participants' clock).
    """

    def __init__(self, gpu_hosts: dict, server_hosts: dict, clock) -> None:
        self.gpu_hosts = dict(gpu_hosts)
        self.server_hosts = dict(server_hosts)
        self.clock = clock
        self._hosts: dict = {}
        self._by_key = {host_key(h): h for h in [*self.gpu_hosts.values(), *self.server_hosts.values()]}

    def link_of(self, host: str):
        """The host actor named ``host`` at the clock (None once its server was lost)."""
        return self._by_key.get(host)

    async def launch(self, run, start_s: float) -> list:
        """Create the run's workers and PS tasks (one message per host), connect them, start their
        loops; returns the loops' refs (they raise if a participant crashed)."""
        key = run.run_id
        plan = run.plan
        for spec in plan.workers:
            if spec.gpu not in self.gpu_hosts:
                raise ServerLostError(f"server of GPU {spec.gpu} was lost")
        for ps in plan.ps:
            if ps.server not in self.server_hosts:
                raise ServerLostError(f"server {ps.server} was lost")
        w_hosts = [self.gpu_hosts[spec.gpu] for spec in plan.workers]
        p_hosts = [self.server_hosts[ps.server] for ps in plan.ps]
        workers = [RunProxy(h, key, spec.gpu) for spec, h in zip(plan.workers, w_hosts)]
        pss = [RunProxy(h, key, ("ps", ps.index)) for ps, h in zip(plan.ps, p_hosts)]
        peers = {spec.gpu: w for spec, w in zip(plan.workers, workers)}
        items: dict[int, tuple] = {}
        for spec, h in zip(plan.workers, w_hosts):
            items.setdefault(id(h), (h, []))[1].append(
                (spec.gpu, StageWorker, (spec, self.clock, (key, "w", spec.rank), start_s),
                 [("connect", (peers, pss))]))
        for ps, h in zip(plan.ps, p_hosts):
            items.setdefault(id(h), (h, []))[1].append(
                (("ps", ps.index), ParamServer, (ps, self.clock, (key, "ps", ps.index), start_s, run.monitor.iterations),
                 [("connect", (peers,))]))
        self._hosts[key] = [h for h, _ in items.values()]
        await asyncio.gather(*(h.setup.remote(key, its, self.clock) for h, its in items.values()))
        return [p.run.remote() for p in workers + pss]

    def drop(self, run) -> None:
        for h in self._hosts.pop(run.run_id, []):
            try:
                h.drop.remote(run.run_id)
            except Exception:  # a host of a lost server
                pass

    def lose_server(self, server: int, gpus) -> None:
        """Never launch on ``server`` again."""
        lost = [self.server_hosts.pop(server, None)] + [self.gpu_hosts.pop(g, None) for g in gpus]
        for h in lost:
            if h is not None:
                self._by_key.pop(host_key(h), None)
