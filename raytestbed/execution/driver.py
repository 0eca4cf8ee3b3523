"""Running a worker program: the half of a driver that is the same on every backend.

A :class:`Driver` runs one worker program (:mod:`raytestbed.execution.worker_program`) until it
must wait for the network, and hands the backend a :class:`Block`: "at ``at`` start these
transfers, wake me when they and these inbound transfers have arrived". The backend performs it
on its clock — the simulator against its flow network (:mod:`raytestbed.sim.pipeline_workers`),
the emulator with ``await`` on its virtual clock (:mod:`raytestbed.emu.executors.worker`) — and
calls :meth:`Driver.wake` with the time the worker wakes, the transfers' spans and (emulator) the
received payloads. Everything else happens here, between two blocks:

* the worker's time ``t`` (emulated seconds): the time of its last wake-up plus what it charged
  since: compute (the strategy's charge) and holding the GPU for inbound flows (A-SRPT eq. 5,
  :class:`~raytestbed.execution.plan.InboundTime`; not again for the part of their flight spent in
  an all-reduce step, which they lengthened already);
* the compute strategy (:mod:`raytestbed.execution.compute`): it charges the passes and holds the
  payloads: what each outbound transfer carries and how many bytes, what a receive brought;
* the per-mini-batch accounts (compute, communication, CPU and profiled seconds) and the records
  :class:`~raytestbed.execution.worker_program.Report` makes; the backend takes them
  (:meth:`Driver.take_records`) and hands them to its :class:`~raytestbed.execution.monitor.RunMonitor`
  (the emulator sends them to the clock with its next block).

A worker that reports a mini-batch without having blocked since its previous report (a one-GPU job:
nothing to send or receive) blocks once at its time, so the iteration's time passes on the clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from raytestbed.execution.plan import InboundTime
from raytestbed.execution.worker_program import (Apply, Begin, Compute, End, Exchange, Out, Program, Receive,
                                                 Report, Send, Split, SumShards)


@dataclass(frozen=True)
class Outbound:
    """A transfer to start: the program's :class:`~raytestbed.execution.worker_program.Out` with its
    payload (``None`` where the backend moves no data), the payload's metadata and its size in bytes."""

    out: Out
    payload: Any
    meta: Any
    nbytes: int | float


@dataclass
class Block:
    """A blocked worker's request to its backend: at ``at`` (emulated s) start ``sends``; wake it
    when they and the inbound transfers ``recvs`` (keys) have arrived."""

    at: float
    sends: tuple[Outbound, ...] = ()
    recvs: tuple[tuple, ...] = ()


@dataclass
class _Account:
    comp: float = 0.0
    comm: float = 0.0
    cpu: float = 0.0
    prof: float = 0.0


class Driver:
    """Runs one worker program on a backend (module docstring).

    Args:
        program: ``(spec, limit) -> generator``: :func:`~raytestbed.execution.worker_program.stage_program`
            or :func:`~raytestbed.execution.worker_program.ps_program`.
        spec: the worker's (or PS's) spec.
        compute: its compute strategy.
        start_s: the run's start (emulated s).
        iterations: mini-batches (a PS: iterations) to run; :attr:`limit` may be lowered while it
            runs (fast-forward).
    """

    def __init__(self, program: Callable[..., Program], spec, compute, start_s: float, iterations: int) -> None:
        self.spec = spec
        self.compute = compute
        self.t = float(start_s)
        self.limit = int(iterations)
        self.inbound = InboundTime()
        self.result: int | None = None  #: the program's return value once it ended (mini-batches run)
        self._program = program(spec, lambda: self.limit)
        self._acc: dict[int, _Account] = {}
        self._phase: tuple[_Account, str, float] | None = None
        self._waiting = None  # the request the worker blocks on
        self._blocked = False  # blocked since its last report
        self._records: list[tuple] = []

    # ------------------------------------------------------------------ the backend's calls
    def start(self) -> Block | None:
        """Run the program to its first block; None if it ended without one."""
        return self._run(None)

    def wake(self, t: float, spans: dict, data: list | None = None) -> Block | None:
        """The block ended at ``t`` (emulated s): ``spans`` ``{key: (start_s, end_s)}`` of its transfers,
        ``data`` the ``(payload, meta)`` of its ``recvs`` in order (None: no payloads). Runs the
        program to its next block; None when it ended."""
        blocked_at, self.t = self.t, t
        req, self._waiting = self._waiting, None
        if isinstance(req, Receive):
            if req.hold_gpu:
                self.t += self.inbound.charge([spans[k] for k in req.keys])
            self.compute.received(req, data)
        elif isinstance(req, Exchange):
            self.inbound.cover(blocked_at, t)
            self.compute.received(req, data)
        return self._run(None)

    def take_records(self) -> list[tuple]:
        """The iteration records made since the last call."""
        recs, self._records = self._records, []
        return recs

    @property
    def done(self) -> bool:
        return self._program is None

    def shift(self, dt: float) -> None:
        """Every time the driver holds moves ``dt`` seconds later (the simulator's fast-forward:
        :mod:`raytestbed.sim.fastforward`)."""
        self.t += dt
        if self._phase is not None:
            a, account, t0 = self._phase
            self._phase = (a, account, t0 + dt)
        self.inbound.shift(dt)
        self._records = [(r[0], r[1], r[2] + dt, *r[3:]) for r in self._records]

    # ------------------------------------------------------------------ the program
    def _run(self, value) -> Block | None:
        while True:
            try:
                req = self._program.send(value)
            except StopIteration as stop:
                self._program = None
                self.result = stop.value
                return None
            value = None
            if isinstance(req, Compute):
                charge = self.compute.compute(req.kind, req.i)
                a = self._acc.setdefault(req.i, _Account())
                self.t += charge.seconds
                a.cpu += charge.cpu_s
                a.prof += charge.profiled_s
            elif isinstance(req, Begin):
                self._phase = (self._acc.setdefault(req.i, _Account()), req.account, self.t)
            elif isinstance(req, End):
                a, account, t0 = self._phase
                setattr(a, account, getattr(a, account) + (self.t - t0))
                self._phase = None
            elif isinstance(req, Split):
                value = self.compute.split(req.i, req.parts)
            elif isinstance(req, SumShards):
                value = self.compute.sum_shards(req.i)
            elif isinstance(req, Apply):
                self.compute.apply(req.i)
            elif isinstance(req, Report):
                self._report(req.i)
                if not self._blocked:
                    return self._block(req, Block(self.t))
                self._blocked = False
            elif isinstance(req, Send):
                return self._block(req, Block(self.t, sends=tuple(self._outbound(o) for o in req.outs)))
            elif isinstance(req, Receive):
                return self._block(req, Block(self.t, recvs=req.keys))
            elif isinstance(req, Exchange):
                return self._block(req, Block(self.t, sends=(self._outbound(req.out),), recvs=(req.key,)))
            else:
                raise TypeError(f"worker program: unknown request {req!r}")

    def _block(self, req, block: Block) -> Block:
        self._waiting = req
        self._blocked = not isinstance(req, Report)
        return block

    def _outbound(self, out: Out) -> Outbound:
        payload, meta, nbytes = self.compute.outbound(out.data)
        return Outbound(out, payload, meta, nbytes)

    def _report(self, i: int) -> None:
        a = self._acc.pop(i)
        loss, samples = self.compute.loss(i)
        self._records.append((i, self.spec.rank, self.t, a.comp, a.comm, loss, samples, a.cpu, a.prof))
