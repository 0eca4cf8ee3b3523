"""The worker program, written once: what a stage replica and a parameter server do, step by step.

A program is a generator that yields **requests** (receive these transfers, compute this pass, send
these bytes to that worker, ...) and never touches a payload or a clock: a driver performs each
request (:class:`~raytestbed.execution.driver.Driver`, with the simulator's flow network or the
emulator's virtual clock underneath) and its compute strategy handles the data
(:mod:`raytestbed.execution.compute`: profiled charges and sizes, or real tensors). The sizes the
strategy returns (:class:`Split`, :class:`SumShards`) are the only values a program gets back.

**A stage replica** (:func:`stage_program`; a data-parallel worker is a replica of the only stage),
per mini-batch i, in PipeDream's 1F1B order (:func:`~raytestbed.execution.plan.one_f_one_b`: stage
s keeps S - s mini-batches in flight, then alternates one backward and one forward):

forward F(i)
    take the activation slices of i from every upstream replica at once, holding the GPU while
    they flowed (A-SRPT eq. 5 charges a stage for its inbound as well as its outbound traffic;
    inbound flows that overlapped in time hold it once,
    :class:`~raytestbed.execution.plan.InboundTime`); compute p^f; send one activation slice of
    A_s / (k_s k_{s+1}) bytes to every downstream replica, one after the other (replica r starts
    with neighbour r, so simultaneous slices go to different receivers).
backward B(i)
    take the gradient slices from every downstream replica the same way; compute p^b; send gradient
    slices upstream one after the other; then synchronise the gradient: a ring all-reduce among
    the stage's k replicas (:func:`_ring_allreduce`: 2(k-1) steps, each sending a chunk of h/k bytes
    to the ring successor while receiving one from the predecessor; reduce-scatter then all-gather;
    A-SRPT eq. 6 / SJF-BCO eq. 8), or for a PS job push a shard of h / #PS bytes to every PS at once
    and take the summed shards back (:func:`_ps_push_pull`, Parrot §2.2); then the SGD step.

**A parameter server** (:func:`ps_program`), per iteration: wait for its shard from every worker,
sum them, send the sum back to every worker at once (so a PS whose shards arrive early pulls early).

**Accounts.** A mini-batch's compute and communication seconds are counted by phases
(:func:`_counted`): the driver adds the worker's time from the start of a phase to its end. A
forward has a receive, a compute and a send phase; a backward a receive, a compute, a send and a
synchronisation phase. After its backward the worker reports mini-batch i (:class:`Report`):
``(i, rank, t_end, compute_s, comm_s, loss, samples, cpu_s, profiled_s)``, which
:class:`~raytestbed.execution.monitor.RunMonitor` turns into whole iterations.

Transfer keys are ``(addressee, kind, i, sender)``: the addressee a worker's GPU or ``("ps", q)``,
the sender a replica index, a ring position, a worker rank or a PS index. Units: seconds, bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from raytestbed.execution.plan import PsSpec, WorkerSpec, coflow_bytes, one_f_one_b, ring_chunks, rotated

# ---------------------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class Out:
    """One outbound transfer: the payload ``data`` names (the strategy's ``(what, i, part)``) goes to
    ``to`` (a worker's GPU or ``("ps", q)``), whose fabric endpoint is ``dst_gpu``. ``coflow``: the
    coflow it belongs to (None: an activation or gradient slice), ``coflow_bytes`` that whole
    coflow's bytes (every transfer of it). Its size is the payload's (the strategy's ``outbound``)."""

    to: Hashable
    dst_gpu: int
    key: tuple
    data: tuple
    coflow: tuple | None = None
    coflow_bytes: float = 0.0


@dataclass(frozen=True)
class Receive:
    """Wait for the inbound transfers ``keys`` of mini-batch ``i`` (``what``: ``act``, ``grad``,
    ``pull`` or ``push``); ``hold_gpu``: hold the GPU while they flowed (A-SRPT eq. 5). The payloads
    go to the strategy."""

    what: str
    i: int
    keys: tuple
    hold_gpu: bool = False


@dataclass(frozen=True)
class Compute:
    """Run pass ``kind`` (``fwd`` / ``bwd``) of mini-batch ``i``: the strategy charges its seconds."""

    kind: str
    i: int


@dataclass(frozen=True)
class Send:
    """Start the transfers ``outs`` at once; go on when they have all arrived."""

    outs: tuple[Out, ...]


@dataclass(frozen=True)
class Exchange:
    """One ring step: send ``out`` and receive ``key`` at once; the received chunk is piece ``chunk``
    of mini-batch ``i``'s gradient: added to ours (reduce-scatter) or, ``gather``, taken as it is
    (all-gather)."""

    out: Out
    key: tuple
    i: int
    chunk: int
    gather: bool


@dataclass(frozen=True)
class Split:
    """Split mini-batch ``i``'s parameter gradient into ``parts`` pieces (ring chunks or PS shards);
    the driver sends back their sizes in bytes."""

    i: int
    parts: int


@dataclass(frozen=True)
class SumShards:
    """A PS sums the workers' shards of iteration ``i``; the driver sends back the bytes of the
    whole gradient they are shards of (every PS's shard together)."""

    i: int


@dataclass(frozen=True)
class Apply:
    """The SGD step with mini-batch ``i``'s synchronised gradient."""

    i: int


@dataclass(frozen=True)
class Begin:
    """A phase of mini-batch ``i`` begins: the worker's time until :class:`End` counts to
    ``account`` (``comp`` or ``comm``)."""

    i: int
    account: str


@dataclass(frozen=True)
class End:
    """The current phase ends."""


@dataclass(frozen=True)
class Report:
    """Mini-batch ``i`` is done here (its iteration record, :mod:`raytestbed.execution.monitor`)."""

    i: int


Request = Receive | Compute | Send | Exchange | Split | SumShards | Apply | Begin | End | Report
Program = Generator[Request, Any, int]

# ---------------------------------------------------------------------------------------- programs


def _counted(i: int, account: str, requests: Iterable[Request] | Generator) -> Program:
    """``requests`` as one phase of mini-batch ``i`` counted to ``account``; returns their result."""
    yield Begin(i, account)
    result = yield from requests
    yield End()
    return result


def stage_program(sp: WorkerSpec, limit: Callable[[], int]) -> Program:
    """One stage replica's 1F1B schedule (module docstring) until ``limit()`` mini-batches are done
    (asked before each pass: fast-forward may lower it); returns how many ran."""
    done = 0
    for kind, i in one_f_one_b(sp.in_flight, limit):
        if kind == "fwd":
            yield from _forward(sp, i)
        else:
            yield from _backward(sp, i)
            yield Report(i)
            done += 1
    return done


def _send_each(sp: WorkerSpec, i: int, kind: str, gpus: tuple[int, ...]) -> Program:
    """One ``kind`` slice of mini-batch ``i`` to each of ``gpus``, one after the other, starting
    with neighbour ``replica`` (:func:`~raytestbed.execution.plan.rotated`)."""
    for r in rotated(len(gpus), sp.replica):
        g = gpus[r]
        yield Send((Out(g, g, (g, kind, i, sp.replica), (kind, i, r)),))
    return None


def _forward(sp: WorkerSpec, i: int) -> Program:
    """F(i): activation slices in (eq. 5), p^f, activation slices out."""
    if sp.stage > 0:
        keys = tuple((sp.gpu, "act", i, q) for q in range(sp.replicas[sp.stage - 1]))
        yield from _counted(i, "comm", [Receive("act", i, keys, hold_gpu=True)])
    yield from _counted(i, "comp", [Compute("fwd", i)])
    if sp.next_gpus:
        yield from _counted(i, "comm", _send_each(sp, i, "act", sp.next_gpus))


def _backward(sp: WorkerSpec, j: int) -> Program:
    """B(j): gradient slices in (eq. 5), p^b, gradient slices out, gradient synchronisation, SGD step."""
    if sp.next_gpus:
        keys = tuple((sp.gpu, "grad", j, r) for r in range(len(sp.next_gpus)))
        yield from _counted(j, "comm", [Receive("grad", j, keys, hold_gpu=True)])
    yield from _counted(j, "comp", [Compute("bwd", j)])
    if sp.prev_gpus:
        yield from _counted(j, "comm", _send_each(sp, j, "grad", sp.prev_gpus))
    yield from _counted(j, "comm", _synchronise(sp, j))


def _synchronise(sp: WorkerSpec, j: int) -> Program:
    """Sum mini-batch ``j``'s gradient over the stage's replicas (or through the PSs), then step."""
    if sp.ps_gpus:
        yield from _ps_push_pull(sp, j)
    elif len(sp.ring) > 1:
        yield from _ring_allreduce(sp, j)
    yield Apply(j)


def _ring_allreduce(sp: WorkerSpec, j: int) -> Program:
    """Ring all-reduce of h bytes over the stage's k replicas in ring order (A-SRPT eq. 6, SJF-BCO
    eq. 8): 2(k-1) steps; step s sends one of k chunks (h/k bytes) to the ring successor and
    receives one from the predecessor at once (:func:`~raytestbed.execution.plan.ring_chunks`:
    reduce-scatter for the first k-1 steps, then all-gather). The stage's all-reduce of one
    iteration is one coflow of 2(k-1) h bytes."""
    k, pos = len(sp.ring), sp.ring_pos
    nxt, prv = sp.ring[(pos + 1) % k], (pos - 1) % k
    sizes = yield Split(j, k)
    cf = (sp.job_id, sp.start_iteration + j, f"ar{sp.stage}")
    total = coflow_bytes("ar", sp, sum(sizes))
    for s in range(2 * (k - 1)):
        send_i, recv_i = ring_chunks(pos, k, s)
        out = Out(nxt, nxt, (nxt, "ar", (j, s), pos), ("chunk", j, send_i), cf, total)
        yield Exchange(out, (sp.gpu, "ar", (j, s), prv), j, recv_i, gather=s >= k - 1)


def _ps_push_pull(sp: WorkerSpec, j: int) -> Program:
    """Parrot §2.2: push one shard of h / #PS bytes to every PS at once (coflow ``push``), then wait
    for every PS's summed shard (coflow ``pull``)."""
    n = len(sp.ps_gpus)
    sizes = yield Split(j, n)
    cf = (sp.job_id, sp.start_iteration + j, "push")
    total = coflow_bytes("push", sp, sum(sizes))
    yield Send(tuple(Out(("ps", q), sp.ps_gpus[q], (("ps", q), "push", j, sp.rank), ("shard", j, q), cf, total)
                     for q in range(n)))
    yield Receive("pull", j, tuple((sp.gpu, "pull", j, q) for q in range(n)))


def ps_program(sp: PsSpec, limit: Callable[[], int]) -> Program:
    """A parameter server (module docstring) until ``limit()`` iterations are served; returns how
    many were."""
    j = 0
    while j < limit():
        yield Receive("push", j, tuple((("ps", sp.index), "push", j, r) for r in range(len(sp.worker_gpus))))
        gradient_bytes = yield SumShards(j)
        cf = (sp.job_id, sp.start_iteration + j, "pull")
        total = coflow_bytes("pull", sp, gradient_bytes)
        yield Send(tuple(Out(g, g, (g, "pull", j, sp.index), ("sum", j, 0), cf, total) for g in sp.worker_gpus))
        j += 1
    return j
