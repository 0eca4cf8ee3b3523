"""Stage-replica workers and parameter servers: participants of the virtual clock.

One :class:`StageWorker` per stage replica of a job (a data-parallel worker is a replica of the
only stage) and one :class:`ParamServer` per parameter server of a PS job. Each runs its worker
program (:mod:`raytestbed.execution.worker_program`: the 1F1B order, the ring all-reduce, the PS
push and pull) through a :class:`~raytestbed.execution.driver.Driver`, whose compute strategy is
``real`` (:class:`~raytestbed.execution.compute.RealCompute` over a
:class:`~raytestbed.emu.executors.compute.RealStage`: run the layers, charge their time) or
``replay`` (:class:`~raytestbed.execution.compute.ReplayCompute`: charge the profiled time, move zero
buffers of the profiled size). This module is the emulator's half of the driver: it performs each
block with ``await``.

Time. Emulated time only passes in steps on the virtual clock (:mod:`raytestbed.emu.vclock`):
"at ``t`` start these transfers, wake me when they and these inbound transfers have arrived"; a
driver's block is one step, made through the host process's :class:`~raytestbed.emu.hostlink.ClockLink`
(the steps of one host's participants travel to the clock together). Compute is charged, not waited for: replay charges the profiled
seconds, real compute charges the worker's own thread CPU seconds at the emulated GPU's speed
(:class:`~raytestbed.emu.executors.compute.ComputeCharge`), so CPU sharing between workers cannot
inflate it.

Data. The payloads (numpy arrays: the real tensors; in replay, zeros standing for the profiled
size, at most ``replay_payload_bytes``) go to the receiver in a direct call (:meth:`deliver`; a plain
method call when the receiver lives in the same host process), not through the clock; the receiver, woken when the fluid model says the flow arrived, waits for them in
wall time while it is still runnable, which holds the clock. Transfer keys are the program's,
prefixed with the run id.

Every mini-batch ends with a record ``(j, rank, t_end, compute_s, comm_s, loss, samples, cpu_s,
profiled_s)`` handed to the clock with the next step; the clock's monitor turns the records of all
workers into one iteration.
"""

from __future__ import annotations

import asyncio

from raytestbed.emu.hostlink import remote_call
from raytestbed.emu.vclock import Send
from raytestbed.execution.compute import RealCompute, ReplayCompute
from raytestbed.execution.driver import Block, Driver
from raytestbed.execution.plan import PsSpec, WorkerSpec
from raytestbed.execution.worker_program import ps_program, stage_program


class _Participant:
    """What workers and parameter servers share: the clock, the mailbox, the async driver loop.

    Subclasses set ``driver`` (their program and compute strategy) and ``_handle(to)`` (the peer a
    transfer addressed to ``to`` is delivered to)."""

    def __init__(self, clock, pid) -> None:
        self.clock = clock  # its host's ClockLink (the launcher or the host sets it)
        self.pid = pid
        self.run_id = pid[0]
        self.driver: Driver | None = None
        self._mail: dict = {}
        self._waiting: dict = {}

    async def deliver(self, key, data, meta=None) -> None:
        """The bytes of transfer ``key`` (sent by a peer, which also told the clock)."""
        fut = self._waiting.pop(key, None)
        if fut is not None and not fut.done():
            fut.set_result((data, meta))
        else:
            self._mail[key] = (data, meta)

    async def _data(self, key):
        """The bytes of transfer ``key``: waited for in wall time (the clock is held meanwhile)."""
        if key in self._mail:
            return self._mail.pop(key)
        fut = asyncio.get_running_loop().create_future()
        self._waiting[key] = fut
        return await fut

    def _key(self, key: tuple) -> tuple:
        return (self.run_id, *key)

    def _handle(self, to):
        raise NotImplementedError

    async def run(self) -> int | None:
        """Run the program to its end; returns the mini-batches (PS: iterations) it ran, None if the
        run was dropped first."""
        driver = self.driver
        block = driver.start()
        while block is not None:
            wake = await self._step(block)
            if wake is None:  # the run was dropped (preempted, failed, its server lost)
                return None
            if wake.skip:  # iterations were fast-forwarded: run that many fewer
                driver.limit -= wake.skip
            data = [await self._data(self._key(k)) for k in block.recvs]
            block = driver.wake(wake.t, {k[1:]: span for k, span in wake.spans.items()}, data)
        await self.clock.leave(self.pid, driver.t, driver.take_records())
        return driver.result

    async def _step(self, block: Block):
        """Deliver the block's payloads to their receivers and block on the virtual clock at its
        time; returns the clock's wake-up (None: the run was dropped)."""
        sends = []
        for o in block.sends:
            key = self._key(o.out.key)
            remote_call(self._handle(o.out.to), "deliver", key, o.payload, o.meta)
            sends.append(Send(key, self.driver.spec.job_id, self.driver.spec.gpu, o.out.dst_gpu, o.nbytes,
                              o.out.coflow, o.out.coflow_bytes))
        return await self.clock.step(self.pid, block.at, sends, [self._key(k) for k in block.recvs],
                                     self.driver.take_records())


class StageWorker(_Participant):
    """One stage replica (see the module docstring). Created by the clock actor's run start.

    Args:
        spec: what this replica does.
        clock: the clock actor (or an in-process clock service) it steps on.
        pid: its participant id ``(run, "w", rank)``.
        start_s: the run's start (emulated s).
    """

    def __init__(self, spec: WorkerSpec, clock, pid, start_s: float = 0.0) -> None:
        super().__init__(clock, pid)
        self.spec = spec
        self.peers: dict[int, object] = {}  # gpu -> worker handle
        self.ps: list = []
        if spec.mode == "real":
            from raytestbed.emu.executors.compute import ComputeCharge, RealStage  # torch: real compute only

            prof = {"fwd": spec.profile.fwd_s, "bwd": spec.profile.bwd_s}
            compute = RealCompute(spec, RealStage(spec), ComputeCharge(prof, factor=spec.compute_factor or None))
        else:
            compute = ReplayCompute(spec)
        self.driver = Driver(stage_program, spec, compute, start_s, spec.iterations)

    def connect(self, peers: dict, ps: list | None = None) -> bool:
        """Handles of the job's other workers (keyed by GPU) and of its PS tasks."""
        self.peers = dict(peers)
        self.ps = list(ps or [])
        return True

    def _handle(self, to):
        return self.ps[to[1]] if isinstance(to, tuple) else self.peers[to]


class ParamServer(_Participant):
    """A parameter-server task of a PS job: sums the workers' gradient shards of each iteration
    and sends the sums back (pull flows start when the last push arrived)."""

    def __init__(self, spec: PsSpec, clock, pid, start_s: float = 0.0, iterations: int = 0) -> None:
        super().__init__(clock, pid)
        self.spec = spec
        self.workers: dict[int, object] = {}  # gpu -> worker handle
        compute = RealCompute(spec) if spec.mode == "real" else ReplayCompute(spec)
        self.driver = Driver(ps_program, spec, compute, start_s, iterations)

    def connect(self, workers: dict) -> bool:
        self.workers = dict(workers)
        return True

    def _handle(self, to):
        return self.workers[to]
