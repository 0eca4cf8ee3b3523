"""The emulated cluster's virtual clock: conservative synchronisation of real processes.

Every process whose progress takes emulated time — each GPU worker and each parameter-server task
of a running job — is a **participant**. A participant runs (real code, in wall time) until it
makes a **step**: "at my time ``at``, start these transfers; wake me when they have all arrived
and these inbound transfers (sent by others) have arrived too". A step with nothing to send or
receive is a timer (a compute charge: ``at`` = now + the compute's emulated seconds). While it
waits in a step the participant is *blocked*; from its wake-up until its next step it is
*runnable*.

Emulated time advances only when no participant is runnable (:meth:`VirtualClock.quiet`): the
clock then handles the earliest pending instant — transfer completions of the fluid model
(:class:`~raytestbed.emu.fluid.FluidNet`, weighted max-min over the cluster's links), steps whose
``at`` has come, or an item someone else scheduled (the scheduler's arrivals and ticks) — and
wakes whoever that satisfies. Nothing sleeps in wall time, so host load, Ray latency and core
counts change how long a trial takes, never its timeline.

Determinism. Participants run concurrently and their steps reach the clock in any wall order, so
the clock never acts on a step when it arrives: it collects them and applies them together, in
participant-id order, at the next quiet moment (:meth:`admit`). Transfers starting at one instant
join the fluid model as one batch. Equal times are ordered: transfer completions, then steps
resuming (``P_DONE``), then scheduled items by their priority, then insertion order.

Messages between participants (the real tensors) do not pass through the clock: a receiver is
woken when the fluid model says the transfer arrived, then waits for the bytes in wall time while
it is still runnable, which keeps the clock where it is (the "message in flight" trap of
conservative synchronisation cannot occur: a message is only ever awaited by a runnable process).

This module has no Ray and no asyncio: wake-ups are callbacks. :mod:`raytestbed.emu.clock_service`
drives it (in a Ray actor, :mod:`raytestbed.emu.clock_actor`; in-process in tests). Units: seconds, bytes, bytes/s.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from raytestbed.core.cluster import Cluster
from raytestbed.core.eventcore import P_DONE
from raytestbed.emu.fluid import FluidNet, Transfer
from raytestbed.network.coflow_book import CoflowBook

#: A step whose ``at`` lies this far behind the clock is counted late (float round-off allowance).
EPS_TIME = 1e-9


class ClockError(RuntimeError):
    """A participant broke the clock's protocol (unknown participant, duplicate transfer key)."""


@dataclass(frozen=True)
class Send:
    """One transfer a participant starts: ``nbytes`` bytes from ``src_gpu`` to ``dst_gpu``.

    ``key`` names it (unique while it is in flight); the receiver's step names the same key.
    ``job_id`` (the job whose weights and rates apply) and ``coflow`` group transfers as the
    fluid model's connections do; ``coflow_bytes``: the bytes of that whole coflow (every transfer of
    it, what ``CoflowStarted`` reports).
    """

    key: Hashable
    job_id: int
    src_gpu: int
    dst_gpu: int
    nbytes: float
    coflow: Hashable | None = None
    coflow_bytes: float = 0.0


@dataclass
class Wake:
    """What a blocked participant gets back: the time it wakes (emulated s), the ``(start_s, end_s)``
    of each transfer of its step (its own sends and the receives it waited for), and how many
    iterations were fast-forwarded since its last wake (``skip``; see :meth:`VirtualClock.shift`)."""

    t: float
    spans: dict[Hashable, tuple[float, float]] = field(default_factory=dict)
    skip: int = 0


@dataclass(eq=False)
class _Flow:
    send: Send
    owner: Hashable  # sending participant
    transfer: Transfer | None = None  # in the fluid model once started
    span: tuple[float, float] | None = None  # set when complete


@dataclass(eq=False)
class _Wait:
    pid: Hashable
    at: float
    sends: tuple[Hashable, ...]
    recvs: tuple[Hashable, ...]
    callback: Callable[[Wake | None], None]
    left: set = field(default_factory=set)
    spans: dict = field(default_factory=dict)
    started: bool = False


@dataclass(eq=False)
class _Part:
    pid: Hashable
    group: Hashable  # the run it belongs to (dropped together)
    wait: _Wait | None = None
    skip: int = 0




class VirtualClock:
    """Participants, their steps and the fluid network on one virtual clock (module docstring).

    Args:
        cluster: the emulated cluster (bandwidths in bytes/s).
        nic_share: ``"fair"`` or ``"reserved"`` (:mod:`raytestbed.emu.fluid`).
        on_item: called ``(t, item)`` for every scheduled item that is not the clock's own
            (``item[0]`` not ``"resume"``); the clock is at ``t``.
        on_coflow: called ``(kind, t, job_id, coflow, bytes)`` when a coflow's first transfer
            starts (``"started"``), when a later one of it starts (``"grew"``) and when all its
            transfers have completed (``"finished"``; :mod:`raytestbed.network.coflow_book`).
    """

    def __init__(self, cluster: Cluster, nic_share: str = "fair",
                 on_item: Callable[[float, tuple], None] | None = None,
                 on_coflow: Callable[[str, float, int, Hashable, float], None] | None = None) -> None:
        self.cluster = cluster
        self.net = FluidNet(cluster, nic_share)
        self.now = 0.0
        self.on_item = on_item
        self.on_coflow = on_coflow
        #: the scheduled items, ``(time, priority, sequence, item)`` in :mod:`heapq` order (a trial's
        #: scheduler hands this list to its event core: :class:`~raytestbed.emu.scheduler.EmuScheduler`)
        self.heap: list = []
        self._seq = itertools.count()
        self._tids = itertools.count()
        self._parts: dict[Hashable, _Part] = {}
        self._runnable: set = set()
        self._inbox: list[tuple[Hashable, float, tuple[Send, ...], tuple, Callable]] = []
        self._flows: dict[Hashable, _Flow] = {}  # by key: pending, in flight, or arrived and unclaimed
        self._recv_waiter: dict[Hashable, _Wait] = {}
        self._by_tid: dict[int, _Flow] = {}
        self._coflows = CoflowBook()  #: coflows started and not complete
        self.bytes_sent: dict[int, float] = defaultdict(float)  #: completed transfer bytes per job
        #: completed bytes per job of the transfers that went through the fluid model (what the flow
        #: simulator counts as sent: same-GPU and empty transfers left out)
        self.fabric_bytes: dict[int, float] = defaultdict(float)
        self.transfers_done = 0
        self.late_steps = 0  #: steps whose ``at`` was behind the clock (a participant bug; should stay 0)
        self.rounds = 0  #: batches handled (a measure of the clock's work)

    # ------------------------------------------------------------------ participants
    def register(self, pid: Hashable, group: Hashable) -> None:
        """Add participant ``pid`` (of run ``group``), runnable now."""
        if pid in self._parts:
            raise ClockError(f"participant {pid!r} is already registered")
        self._parts[pid] = _Part(pid, group)
        self._runnable.add(pid)

    def leave(self, pid: Hashable) -> None:
        """Participant ``pid`` ended (its process will make no more steps)."""
        p = self._parts.pop(pid, None)
        self._runnable.discard(pid)
        if p is not None and p.wait is not None:
            self._cancel(p.wait)

    def step(self, pid: Hashable, at: float, sends: Iterable[Send] = (), recvs: Iterable[Hashable] = (),
             callback: Callable[[Wake | None], None] = lambda w: None) -> None:
        """Participant ``pid`` blocks (module docstring). ``callback(Wake)`` is called when it wakes,
        ``callback(None)`` if its run is dropped first. Applied at the next :meth:`admit`."""
        if pid not in self._parts:
            callback(None)  # a participant of a dropped run: nothing to wait for
            return
        if pid not in self._runnable:
            raise ClockError(f"participant {pid!r} made a step while already blocked")
        self._runnable.discard(pid)
        self._inbox.append((pid, float(at), tuple(sends), tuple(recvs), callback))

    def drop(self, group: Hashable) -> list[Hashable]:
        """Remove every participant of run ``group``, its transfers and waits; returns the pids."""
        pids = [pid for pid, p in self._parts.items() if p.group == group]
        gone = set(pids)
        for pid in pids:
            self.leave(pid)
        self._inbox = [r for r in self._inbox if r[0] not in gone]
        for key, f in list(self._flows.items()):
            if f.owner in gone:
                self._forget(key, f)
        self._coflows.drop(group)
        return pids

    def quiet(self) -> bool:
        """True when no participant is runnable (time may advance)."""
        return not self._runnable

    @property
    def runnable(self) -> frozenset:
        """Participants the clock waits for."""
        return frozenset(self._runnable)

    @property
    def participants(self) -> int:
        return len(self._parts)

    def group_of(self, pid: Hashable) -> Hashable | None:
        p = self._parts.get(pid)
        return None if p is None else p.group

    # ------------------------------------------------------------------ scheduling
    def schedule(self, t: float, prio: int, item: tuple) -> None:
        """Schedule ``item`` (``item[0]`` names its kind) at emulated time ``t`` (>= now)."""
        heapq.heappush(self.heap, (max(float(t), self.now), prio, next(self._seq), item))

    def next_item_time(self, kinds: Callable[[tuple], bool] | None = None) -> float:
        """Earliest scheduled item (of the kinds ``kinds`` accepts), inf if none."""
        if kinds is None:
            return self.heap[0][0] if self.heap else math.inf
        return min((t for t, _, _, it in self.heap if kinds(it)), default=math.inf)

    def next_time(self) -> float:
        """When the next thing happens (a completion or a scheduled item); inf if nothing is pending."""
        t = self.net.next_finish() if len(self.net) else math.inf
        return min(t, self.heap[0][0]) if self.heap else t

    # ------------------------------------------------------------------ the two moves
    def admit(self) -> int:
        """Apply the steps received since the last call, in participant order; returns wake-ups.

        Call only when :meth:`quiet`. Transfers of steps whose ``at`` has come start now, as one
        batch; later steps wait for their time in the heap."""
        reqs, self._inbox = self._inbox, []
        reqs.sort(key=lambda r: _order(r[0]))
        woke = 0
        to_start: list[_Wait] = []
        for pid, at, sends, recvs, cb in reqs:
            p = self._parts.get(pid)
            if p is None:
                cb(None)
                continue
            if at < self.now - EPS_TIME:
                self.late_steps += 1
            at = max(at, self.now)
            w = _Wait(pid, at, tuple(s.key for s in sends), tuple(recvs), cb)
            p.wait = w
            for s in sends:
                if s.key in self._flows:
                    raise ClockError(f"participant {pid!r}: transfer key {s.key!r} is already in use")
                self._flows[s.key] = _Flow(s, pid)
                w.left.add(s.key)
            for k in recvs:
                f = self._flows.get(k)
                if f is not None and f.span is not None:  # arrived before it was asked for
                    w.spans[k] = f.span
                    del self._flows[k]
                else:
                    if k in self._recv_waiter:
                        raise ClockError(f"participant {pid!r}: transfer {k!r} is already awaited")
                    self._recv_waiter[k] = w
                    w.left.add(k)
            if at <= self.now:
                to_start.append(w)
            else:
                self.schedule(at, P_DONE, ("resume", pid, w))
        woke += self._start(to_start)
        return woke

    def advance(self) -> int:
        """Handle the earliest pending instant (one batch); returns participants woken.

        Call only when :meth:`quiet` and after :meth:`admit`. Completions come first at equal
        times, then steps resuming at that time, then one scheduled item of another kind."""
        t_net = self.net.next_finish() if len(self.net) else math.inf
        t_heap = self.heap[0][0] if self.heap else math.inf
        if not (math.isfinite(t_net) or math.isfinite(t_heap)):
            return 0
        self.rounds += 1
        if t_net <= t_heap:
            done = self.net.advance(t_net)
            self.now = max(self.now, t_net)
            return self._complete(done)
        woke = self._complete(self.net.advance(t_heap))
        self.now = max(self.now, t_heap)
        t, _, _, item = heapq.heappop(self.heap)
        if item[0] == "resume":
            batch = [item[2]]
            while self.heap and self.heap[0][0] <= t and self.heap[0][3][0] == "resume":
                batch.append(heapq.heappop(self.heap)[3][2])
            live = [w for w in batch if w.pid in self._parts and self._parts[w.pid].wait is w]
            return woke + self._start(sorted(live, key=lambda w: _order(w.pid)))
        if self.on_item is not None:
            self.on_item(t, item)
        return woke

    # ------------------------------------------------------------------ fast-forward
    def pause(self, pids: set) -> list[Transfer]:
        """Take the in-flight transfers sent by ``pids`` out of the fluid model (bytes left kept)."""
        out = []
        for f in self._flows.values():
            x = f.transfer
            if f.owner in pids and x is not None and f.span is None and x.conn and x.conn in self.net.conns \
                    and x.tid in self.net.conns[x.conn].members:
                self.net.remove(x)
                out.append(x)
        return out

    def unpause(self, transfers: list[Transfer], dt: float) -> None:
        """Put paused transfers back into the fluid model now (their start moved by ``dt``)."""
        for x in transfers:
            if x.tid in self._by_tid:  # not dropped meanwhile
                x.start_s += dt
                self.net.add(x)

    def shift_items(self, belongs: Callable[[tuple], bool], dt: float) -> None:
        """Move the scheduled items ``belongs`` accepts by ``dt`` seconds (never before now)."""
        self.heap[:] = [((max(self.now, t + dt)) if belongs(it) else t, pr, s, it) for t, pr, s, it in self.heap]
        heapq.heapify(self.heap)  # in place: the scheduler's event core shares this list

    def set_skip(self, pid: Hashable, n: int) -> None:
        """Participant ``pid`` learns at its next wake that ``n`` iterations were fast-forwarded."""
        p = self._parts.get(pid)
        if p is not None:
            p.skip = int(n)

    # ------------------------------------------------------------------ internals
    def _start(self, waits: list[_Wait]) -> int:
        """Start the transfers of ``waits`` now (one batch) and wake those already satisfied."""
        done: list[Transfer] = []
        for w in waits:
            w.started = True
            for k in w.sends:
                f = self._flows[k]
                s = f.send
                x = Transfer(next(self._tids), s.job_id, s.coflow, s.src_gpu, s.dst_gpu,
                             self.cluster.server_of(s.src_gpu), self.cluster.server_of(s.dst_gpu),
                             float(s.nbytes), self.now, coflow_bytes=float(s.coflow_bytes))
                f.transfer = x
                self._by_tid[x.tid] = f
                self._coflow_start(x, f.owner)
                if s.src_gpu == s.dst_gpu or s.nbytes <= 0:
                    x.remaining = 0.0
                    x.finish_s = self.now
                    done.append(x)
                else:
                    self.net.add(x)
        woke = self._complete(done)
        for w in waits:  # steps with nothing (left) to wait for
            if not w.left and self._parts.get(w.pid) is not None and self._parts[w.pid].wait is w:
                self._wake(w)
                woke += 1
        return woke

    def _complete(self, done: list[Transfer]) -> int:
        woke = 0
        for x in done:
            f = self._by_tid.pop(x.tid, None)
            if f is None:
                continue
            f.span = (x.start_s, x.finish_s)
            self.bytes_sent[x.job_id] += x.nbytes
            if x.conn:  # it moved through the fluid model (not a same-GPU or empty transfer)
                self.fabric_bytes[x.job_id] += x.nbytes
            self.transfers_done += 1
            self._coflow_end(x)
            key = f.send.key
            receiver = self._recv_waiter.pop(key, None)
            if receiver is not None:  # taken at once; else kept until the receiver asks for it
                del self._flows[key]
            for w in (self._owner_wait(f), receiver):
                if w is None or key not in w.left:
                    continue
                w.left.discard(key)
                w.spans[key] = f.span
                if not w.left and w.started:
                    self._wake(w)
                    woke += 1
        return woke

    def _owner_wait(self, f: _Flow) -> _Wait | None:
        p = self._parts.get(f.owner)
        return None if p is None else p.wait

    def _wake(self, w: _Wait) -> None:
        p = self._parts[w.pid]
        p.wait = None
        skip, p.skip = p.skip, 0
        self._runnable.add(w.pid)
        w.callback(Wake(self.now, dict(w.spans), skip))

    def _cancel(self, w: _Wait) -> None:
        for k in w.recvs:
            if self._recv_waiter.get(k) is w:
                del self._recv_waiter[k]
        w.callback(None)

    def _forget(self, key, f: _Flow) -> None:
        del self._flows[key]
        if f.transfer is not None and f.span is None:
            self._by_tid.pop(f.transfer.tid, None)
            self.net.remove(f.transfer)  # (its coflow is forgotten with its run: :meth:`drop`)
        w = self._recv_waiter.pop(key, None)
        if w is not None:
            w.left.discard(key)

    def _coflow_start(self, x: Transfer, owner: Hashable) -> None:
        if x.coflow_id is None:
            return
        first = self._coflows.start(x.coflow_id, x.coflow_bytes, self._parts[owner].group)
        if self.on_coflow is not None:
            self.on_coflow("started" if first else "grew", self.now, x.job_id, x.coflow_id, x.coflow_bytes)

    def _coflow_end(self, x: Transfer) -> None:
        if x.coflow_id is None:
            return
        moved = self._coflows.arrive(x.coflow_id, x.nbytes)
        if moved is not None and self.on_coflow is not None:
            self.on_coflow("finished", self.now, x.job_id, x.coflow_id, moved)


def _order(pid: Hashable) -> tuple:
    """A total, deterministic order over participant ids of mixed types. A run's participants
    ``(run id, "w", rank)`` and ``(run id, "ps", index)`` go by run, then its workers by rank, then
    its parameter servers by index (the flow simulator's order, :mod:`raytestbed.sim.pipeline_workers`)."""
    if isinstance(pid, tuple) and len(pid) == 3 and pid[1] in ("w", "ps") and isinstance(pid[2], int):
        return ("", repr(pid[0]), 0 if pid[1] == "w" else 1, pid[2])
    return (type(pid).__name__, repr(pid), 0, 0)
