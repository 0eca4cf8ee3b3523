"""Stage-replica workers and parameter servers: participants of the virtual clock.

One :class:`StageWorker` per stage replica of a job (a data-parallel worker is
a replica of the only stage). Per mini-batch i it does, PipeDream 1F1B order
(S - s forwards in flight on stage s, then one backward, one forward, ...):

forward F(i)
    take the activation slices of i from every upstream replica, holding the
    emulated GPU while they flowed (A-SRPT eq. 5 charges a stage for its inbound
    as well as its outbound traffic; inbound flows that overlapped in time hold
    it once: :class:`InboundTime`); compute (``real``: run the
    layers; ``replay``: the profiled p^f); send one activation slice to every
    downstream replica, one after the other (replica r starts with neighbour r,
    so simultaneous slices go to different receivers).
backward B(i)
    take the gradient slices from every downstream replica (holding the GPU for
    their flows); compute (p^b); send gradient slices upstream; ring all-reduce
    among the stage's replicas (2(k-1) steps of h/k bytes, reduce-scatter then
    all-gather, A-SRPT eq. 6 / SJF-BCO eq. 8); SGD step. PS jobs push h/#PS
    bytes to every PS and pull the summed gradient back instead (Parrot).

Time. Each worker keeps ``t``, its emulated time: the virtual clock's time at its
last wake-up plus what it charged since (compute, holding the GPU for inbound
flows). Emulated time only passes in :meth:`_step` calls to the virtual clock
(:mod:`raytestbed.emu.vclock`): "at ``t`` start these transfers, wake me when they
and these inbound transfers have arrived". Compute is charged, not waited for:
replay charges the profiled seconds, real compute charges the worker's own thread
CPU seconds at the emulated GPU's speed (:class:`~raytestbed.emu.executors.compute.ComputeCharge`),
so CPU sharing between workers cannot inflate it.

Data. The real bytes (numpy buffers: the real tensors; in replay, zeros standing
for the profiled size, at most ``replay_payload_bytes``) go to the receiver in a direct call (:meth:`deliver`), not through
the clock; the receiver, woken when the fluid model says the flow arrived, waits
for them in wall time while it is still runnable, which holds the clock.

Every iteration ends with a record ``(j, rank, t_end, compute_s, comm_s, loss,
samples, cpu_s, profiled_s)`` handed to the clock with the next step; the clock's monitor
turns the records of all workers into one iteration.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import numpy as np

from raytestbed.execution.plan import (InboundTime, PsSpec, WorkerSpec, coflow_bytes, one_f_one_b, ring_chunks,
                                          rotated, split_sizes)
from raytestbed.emu.vclock import Send, Wake


def remote_call(handle, method: str, *args):
    """``handle.method(*args)`` on a Ray actor handle (``.remote``) or an in-process object; returns
    an awaitable (an ObjectRef, or a task for an in-process coroutine)."""
    m = getattr(handle, method)
    if hasattr(m, "remote"):
        return m.remote(*args)
    res = m(*args)
    if asyncio.iscoroutine(res):
        return asyncio.ensure_future(res)
    fut = asyncio.get_running_loop().create_future()
    fut.set_result(res)
    return fut


class RunDropped(Exception):
    """The run was stopped (preempted, failed, its server lost): the participant ends."""


class _Participant:
    """What workers and parameter servers share: the clock, the mailbox, the step call."""

    def __init__(self, clock, pid, start_s: float) -> None:
        self.clock = clock
        self.pid = pid
        self.t = float(start_s)
        self.stepped = False
        self.records: list[tuple] = []
        self._mail: dict = {}
        self._waiting: dict = {}
        self._zeros: dict[int, np.ndarray] = {}

    def _buffer(self, nbytes: int) -> np.ndarray:
        """A replay payload standing for ``nbytes`` bytes: zeros, read-only, one per size, reused; at
        most ``payload_cap`` bytes (the fluid model charges ``nbytes`` whatever moves)."""
        cap = getattr(self.spec, "replay_payload_bytes", None)
        nbytes = int(nbytes if cap is None else min(nbytes, cap))
        buf = self._zeros.get(nbytes)
        if buf is None:
            buf = self._zeros[nbytes] = np.zeros(int(nbytes), dtype=np.uint8)
            buf.flags.writeable = False
        return buf

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

    async def _step(self, sends=(), recvs=()) -> dict:
        """Block on the virtual clock at ``t`` (module docstring); returns the transfers' spans."""
        recs, self.records = self.records, []
        wake: Wake | None = await remote_call(self.clock, "step", self.pid, self.t, list(sends), list(recvs), recs)
        if wake is None:
            raise RunDropped(str(self.pid))
        self.t = wake.t
        self.stepped = True
        if wake.skip:
            self._skip(wake.skip)
        return wake.spans

    def _skip(self, n: int) -> None:
        """``n`` iterations were fast-forwarded: run that many fewer."""

    async def _leave(self) -> None:
        recs, self.records = self.records, []
        await remote_call(self.clock, "leave", self.pid, self.t, recs)


class StageWorker(_Participant):
    """One stage replica (see the module docstring). Created by the clock actor's run start.

    Args:
        spec: what this replica does.
        clock: the clock actor (or an in-process clock service) it steps on.
        pid: its participant id ``(run, "w", rank)``.
        start_s: the run's start (emulated s).
    """

    def __init__(self, spec: WorkerSpec, clock, pid, start_s: float = 0.0) -> None:
        super().__init__(clock, pid, start_s)
        self.spec = spec
        self.run_id = pid[0]
        self.peers: dict[int, object] = {}  # gpu -> worker handle
        self.ps: list = []
        self.limit = spec.iterations
        self.stage = None
        self.acc: dict[int, dict] = defaultdict(lambda: {"comp": 0.0, "comm": 0.0, "cpu": 0.0, "prof": 0.0})
        self.meta: dict[int, dict] = {}
        self.charges = None
        self.inbound = InboundTime()
        if spec.mode == "real":
            from raytestbed.emu.executors.compute import ComputeCharge, RealStage

            self.stage = RealStage(spec)
            prof = {"fwd": spec.profile.fwd_s, "bwd": spec.profile.bwd_s}
            self.charges = ComputeCharge(prof, factor=spec.compute_factor or None)

    # ------------------------------------------------------------- control
    def connect(self, peers: dict, ps: list | None = None) -> bool:
        """Handles of the job's other workers (keyed by GPU) and of its PS tasks."""
        self.peers = dict(peers)
        self.ps = list(ps or [])
        return True

    def param_bytes(self) -> int:
        return self.stage.param_bytes if self.stage is not None else int(self.spec.profile.param_bytes)

    def _skip(self, n: int) -> None:
        self.limit -= n

    # ------------------------------------------------------------- helpers
    def _key(self, dst, kind: str, i, src: int) -> tuple:
        return (self.run_id, dst, kind, i, src)

    async def _send_one(self, dst_gpu: int, key: tuple, payload: np.ndarray, meta=None, coflow=None,
                        nbytes: int | None = None) -> None:
        """Hand ``payload`` to the worker on ``dst_gpu`` and block until its flow of ``nbytes`` bytes
        (default: the payload's size) arrived."""
        remote_call(self.peers[dst_gpu], "deliver", key, payload, meta)
        n = payload.nbytes if nbytes is None else nbytes
        await self._step(sends=[Send(key, self.spec.job_id, self.spec.gpu, dst_gpu, n, coflow)])

    async def _receive(self, keys: list) -> list:
        """Wait for the inbound transfers ``keys``; hold the GPU while they flowed (eq. 5: :class:`InboundTime`);
        returns their (data, meta) and adds the time to the communication account."""
        t0 = self.t
        spans = await self._step(recvs=keys)
        self.t += self.inbound.charge([spans[k] for k in keys])
        got = [await self._data(k) for k in keys]
        return got, self.t - t0

    def _charge(self, kind: str, fn, *args):
        """Run pass ``kind`` (``fwd`` / ``bwd``) of the real stage and charge its time — thread CPU time,
        or CUDA event time on a GPU, as the profiler measures (:mod:`raytestbed.profile.timers`) — at
        the emulated GPU's speed (:class:`~raytestbed.emu.executors.compute.ComputeCharge`)."""
        out, cpu = self.stage.timer.time(fn, *args)
        self.t += self.charges.charge(kind, cpu)
        return out, cpu

    # ------------------------------------------------------------- the loop
    async def run(self) -> int:
        """Run the 1F1B schedule until ``limit`` mini-batches are done; returns how many ran here."""
        j = 0
        try:
            for kind, i in one_f_one_b(self.spec.in_flight, lambda: self.limit):
                if kind == "fwd":
                    await self._forward(i)
                    continue
                self.stepped = False
                await self._backward(i)
                if not self.stepped:  # nothing blocked this iteration: charge its time now
                    await self._step()
                j += 1
            await self._leave()
        except RunDropped:
            pass
        return j

    async def _forward(self, i: int) -> None:
        sp = self.spec
        a = self.acc[i]
        x, idx = None, None
        if sp.stage > 0:
            keys = [self._key(sp.gpu, "act", i, q) for q in range(sp.replicas[sp.stage - 1])]
            pieces, comm = await self._receive(keys)
            a["comm"] += comm
            if sp.mode == "real":
                x = np.concatenate([p[0] for p in pieces])
                idx = np.concatenate([p[1]["idx"] for p in pieces])
            self.meta[i] = {"sizes": [len(p[1]["idx"]) if p[1] else 0 for p in pieces]}
        elif sp.mode == "real":
            idx = self.stage.first_shard()
        t0 = self.t
        if sp.mode == "real":
            (out, loss), cpu = self._charge("fwd", self.stage.forward, i, x, idx)
            a["cpu"] += cpu
            if loss is not None:
                a["loss"], a["n"] = loss, len(idx)
        else:
            self.t += sp.profile.fwd_s
            out = None
        a["comp"] += self.t - t0
        a["prof"] += sp.profile.fwd_s
        if sp.next_gpus:
            t0 = self.t
            k_next = len(sp.next_gpus)
            if sp.mode == "real":
                parts = np.array_split(out, k_next)
                idxs = np.array_split(idx, k_next)
                for r in rotated(k_next, sp.replica):
                    g = sp.next_gpus[r]
                    await self._send_one(g, self._key(g, "act", i, sp.replica), parts[r], {"idx": idxs[r]})
            else:
                buf = self._buffer(sp.act_out_bytes)
                for r in rotated(k_next, sp.replica):
                    g = sp.next_gpus[r]
                    await self._send_one(g, self._key(g, "act", i, sp.replica), buf, nbytes=sp.act_out_bytes)
            a["comm"] += self.t - t0

    async def _backward(self, j: int) -> None:
        sp = self.spec
        a = self.acc[j]
        grad = None
        if sp.next_gpus:
            keys = [self._key(sp.gpu, "grad", j, r) for r in range(len(sp.next_gpus))]
            pieces, comm = await self._receive(keys)
            a["comm"] += comm
            if sp.mode == "real":
                grad = np.concatenate([p[0] for p in pieces])
        t0 = self.t
        if sp.mode == "real":
            gin, cpu = self._charge("bwd", self.stage.backward, j, grad)
            a["cpu"] += cpu
        else:
            self.t += sp.profile.bwd_s
            gin = None
        a["comp"] += self.t - t0
        a["prof"] += sp.profile.bwd_s
        if sp.prev_gpus:
            t0 = self.t
            if sp.mode == "real":
                sizes = self.meta[j]["sizes"]
                parts = np.split(gin, np.cumsum(sizes)[:-1])
                nbytes = [x.nbytes for x in parts]
            else:
                parts = [self._buffer(sp.act_in_bytes)] * len(sp.prev_gpus)
                nbytes = [sp.act_in_bytes] * len(sp.prev_gpus)
            for q in rotated(len(sp.prev_gpus), sp.replica):
                g = sp.prev_gpus[q]
                await self._send_one(g, self._key(g, "grad", j, sp.replica), parts[q], nbytes=nbytes[q])
            a["comm"] += self.t - t0
        self.meta.pop(j, None)
        # gradient synchronisation
        t0 = self.t
        flat = None
        if sp.mode == "real":  # flattening and the SGD step are not charged: profiles time fwd + bwd only
            flat = self.stage.flat_grad(j)
        if sp.ps_gpus:
            total = await self._ps_sync(j, flat)
        elif len(sp.ring) > 1:
            total = await self._ring_allreduce(j, flat)
        else:
            total = flat
        if sp.mode == "real":
            self.stage.apply(total)
        a["comm"] += self.t - t0
        acc = self.acc.pop(j)
        self.records.append((j, sp.rank, self.t, acc["comp"], acc["comm"], acc.get("loss"), acc.get("n", 0),
                             acc["cpu"], acc["prof"]))

    # ------------------------------------------------------------- all-reduce
    async def _ring_allreduce(self, j: int, flat: np.ndarray | None) -> np.ndarray | None:
        """Sum ``flat`` over the stage's replicas: reduce-scatter + all-gather, 2(k-1) steps.

        Step t sends one of k chunks to the ring successor and receives one from the
        predecessor, both at once. In replay mode the chunks are buffers of h/k bytes.
        """
        sp = self.spec
        k, pos = len(sp.ring), sp.ring_pos
        nxt = sp.ring[(pos + 1) % k]
        prv_pos = (pos - 1) % k
        if flat is not None:
            chunks = [c.copy() for c in np.array_split(flat, k)]
            sizes = [c.nbytes for c in chunks]
        else:
            sizes = split_sizes(int(sp.profile.param_bytes), k)
            chunks = [self._buffer(n) for n in sizes]
        coflow = (sp.job_id, sp.start_iteration + j, f"ar{sp.stage}")
        total = coflow_bytes("ar", sp, sum(sizes))
        for step in range(2 * (k - 1)):
            send_i, recv_i = ring_chunks(pos, k, step)
            out_key = self._key(nxt, "ar", (j, step), pos)
            in_key = self._key(sp.gpu, "ar", (j, step), prv_pos)
            remote_call(self.peers[nxt], "deliver", out_key, chunks[send_i], None)
            await self._step(sends=[Send(out_key, sp.job_id, sp.gpu, nxt, sizes[send_i], coflow, total)],
                             recvs=[in_key])
            data, _ = await self._data(in_key)
            if flat is not None:
                if step < k - 1:
                    chunks[recv_i] = chunks[recv_i] + data
                else:
                    chunks[recv_i] = np.array(data)
        return np.concatenate(chunks) if flat is not None else None

    async def _ps_sync(self, j: int, flat: np.ndarray | None) -> np.ndarray | None:
        """Push gradient shards to every PS (one coflow), pull the summed shards back (another)."""
        sp = self.spec
        n = len(sp.ps_gpus)
        it = sp.start_iteration + j
        if flat is not None:
            shards = np.array_split(flat, n)
            sizes = [x.nbytes for x in shards]
        else:
            sizes = split_sizes(int(sp.profile.param_bytes), n)
            shards = [self._buffer(m) for m in sizes]
        sends = []
        total = coflow_bytes("push", sp, sum(sizes))
        for p in range(n):
            key = self._key(("ps", p), "push", j, sp.rank)
            remote_call(self.ps[p], "deliver", key, shards[p], {"gradient_bytes": sum(sizes)})
            sends.append(Send(key, sp.job_id, sp.gpu, sp.ps_gpus[p], sizes[p], (sp.job_id, it, "push"), total))
        await self._step(sends=sends)
        keys = [self._key(sp.gpu, "pull", j, p) for p in range(n)]
        await self._step(recvs=keys)
        pulled = [await self._data(k) for k in keys]
        return np.concatenate([d for d, _ in pulled]) if flat is not None else None


class ParamServer(_Participant):
    """A parameter-server task of a PS job: sums the workers' gradient shards of each iteration
    and sends the sums back (pull flows start when the last push arrived)."""

    def __init__(self, spec: PsSpec, clock, pid, start_s: float = 0.0, iterations: int = 0) -> None:
        super().__init__(clock, pid, start_s)
        self.spec = spec
        self.run_id = pid[0]
        self.limit = int(iterations)
        self.workers: dict[int, object] = {}  # gpu -> worker handle

    def connect(self, workers: dict) -> bool:
        self.workers = dict(workers)
        return True

    def _skip(self, n: int) -> None:
        self.limit -= n

    async def run(self) -> int:
        sp = self.spec
        ranks = range(len(sp.worker_gpus))
        j = 0
        try:
            while j < self.limit:
                keys = [(self.run_id, ("ps", sp.index), "push", j, r) for r in ranks]
                await self._step(recvs=keys)
                got = [await self._data(k) for k in keys]
                shards = [d for d, _ in got]
                if sp.mode == "real":
                    out = np.sum(np.stack(shards), axis=0)
                    nbytes = out.nbytes
                    total = coflow_bytes("pull", sp, (got[0][1] or {}).get("gradient_bytes", 0))
                else:
                    out, nbytes = self._buffer(sp.shard_bytes), sp.shard_bytes
                    total = coflow_bytes("pull", sp, sp.num_ps * sp.shard_bytes)
                sends = []
                for g in sp.worker_gpus:
                    key = (self.run_id, g, "pull", j, sp.index)
                    remote_call(self.workers[g], "deliver", key, out, None)
                    sends.append(Send(key, sp.job_id, sp.gpu, g, nbytes, (sp.job_id, sp.start_iteration + j, "pull"),
                                      total))
                await self._step(sends=sends)
                j += 1
            await self._leave()
        except RunDropped:
            pass
        return j
