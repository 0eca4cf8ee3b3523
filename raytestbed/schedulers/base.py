"""The policy interface: events in, decisions out (DESIGN.md "The policy interface").

A policy is a small object with one method::

    decisions = policy.on_event(event, view)

It never imports Ray or torch, and it runs unchanged in the simulator and in the
emulator. Two roles exist and can run together in one trial:

* ``placement`` policies (admission + GPU placement: FIFO, A-SRPT, SJF-BCO, ...)
  emit :class:`StartJob`, :class:`Preempt` and :class:`Resize`;
* ``network`` policies (fair sharing, Parrot, Aalo, ...) emit
  :class:`SetFlowWeights` or :class:`SetFlowRates`.

Every event is delivered to both policies; each ignores what it does not need.
The backend measures the wall time of every ``on_event`` call.

To add a policy: write one module in ``raytestbed/schedulers/`` with a subclass
of :class:`Policy` decorated by :func:`register_policy`; it is then available to
trials and to ``raytestbed policies``.
"""

from __future__ import annotations

import importlib
import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from raytestbed.core.job import Job
from raytestbed.core.placement import Placement
from raytestbed.core.state import ClusterView
from raytestbed.errors import PolicyError

# ---------------------------------------------------------------------------
# Events (backend -> policy)
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Event:
    """Base class; ``time`` in seconds."""

    time: float

    @property
    def kind(self) -> str:
        return type(self).__name__

    def to_json(self) -> dict[str, Any]:
        return {"t": self.time, "event": self.kind}


@dataclass(frozen=True, slots=True)
class JobArrived(Event):
    job: Job

    def to_json(self):
        return {"t": self.time, "event": self.kind, "job": self.job.job_id}


@dataclass(frozen=True, slots=True)
class JobStarted(Event):
    job_id: int
    placement: Placement

    def to_json(self):
        return {"t": self.time, "event": self.kind, "job": self.job_id, "gpus": list(self.placement.gpus)}


@dataclass(frozen=True, slots=True)
class JobFinished(Event):
    """A job completed all its iterations; ``iterations`` is the true n_i (for predictors)."""

    job_id: int
    iterations: int

    def to_json(self):
        return {"t": self.time, "event": self.kind, "job": self.job_id, "iterations": self.iterations}


@dataclass(frozen=True, slots=True)
class JobFailed(Event):
    """A running job lost its GPUs (server failure); it is pending again with its progress kept."""

    job_id: int
    reason: str

    def to_json(self):
        return {"t": self.time, "event": self.kind, "job": self.job_id, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class IterationMeasured(Event):
    """Measured (emulator) or modelled (simulator) time of one iteration, seconds."""

    job_id: int
    seconds: float
    compute_s: float = 0.0
    comm_s: float = 0.0

    def to_json(self):
        return {"t": self.time, "event": self.kind, "job": self.job_id, "seconds": self.seconds}


@dataclass(frozen=True, slots=True)
class CoflowStarted(Event):
    job_id: int
    coflow_id: tuple
    bytes: float

    def to_json(self):
        return {"t": self.time, "event": self.kind, "job": self.job_id, "coflow": list(self.coflow_id),
                "bytes": self.bytes}


@dataclass(frozen=True, slots=True)
class CoflowFinished(Event):
    job_id: int
    coflow_id: tuple
    bytes: float

    def to_json(self):
        return {"t": self.time, "event": self.kind, "job": self.job_id, "coflow": list(self.coflow_id),
                "bytes": self.bytes}


@dataclass(frozen=True, slots=True)
class Tick(Event):
    """Periodic wake-up for policies that set ``tick_interval_s``, or one asked for by :class:`WakeUp`."""


@dataclass(frozen=True, slots=True)
class ServerLost(Event):
    server_id: int
    failed_jobs: tuple[int, ...] = ()

    def to_json(self):
        return {"t": self.time, "event": self.kind, "server": self.server_id, "failed": list(self.failed_jobs)}


# ---------------------------------------------------------------------------
# Decisions (policy -> backend)
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decision:
    def to_json(self) -> dict[str, Any]:
        d = {"decision": type(self).__name__}
        d.update(asdict(self))
        return d


@dataclass(frozen=True, slots=True)
class StartJob(Decision):
    """Start a pending job on the given GPUs (gang: all at once)."""

    job_id: int
    placement: Placement

    def to_json(self):
        return {"decision": "StartJob", "job": self.job_id, "gpus": list(self.placement.gpus),
                "ps": list(self.placement.ps_servers)}


@dataclass(frozen=True, slots=True)
class Preempt(Decision):
    """Stop a running job and return its GPUs; progress is kept, it becomes pending."""

    job_id: int


@dataclass(frozen=True, slots=True)
class Resize(Decision):
    """Move a running job to a new placement, possibly with another worker count (elastic jobs)."""

    job_id: int
    placement: Placement

    def to_json(self):
        return {"decision": "Resize", "job": self.job_id, "gpus": list(self.placement.gpus)}



def job_for_placement(job: Job, placement: Placement, policy: str) -> Job:
    """The job as it runs on ``placement``: an elastic single-stage job takes the placement's worker count.

    Both backends apply this to StartJob and Resize, so GADGET-style elastic starts behave alike.
    Raises :class:`PolicyError` when the count is outside 1..``job.max_workers`` (or the job is not elastic).
    """
    new_workers = len(placement.stage_gpus[0]) if placement.stage_gpus else 0
    if job.num_stages == 1 and new_workers != job.stages[0].replicas:
        if job.max_workers is None or new_workers > job.max_workers or new_workers < 1:
            raise PolicyError(f"{policy}: job {job.job_id} cannot run {new_workers} workers")
        job = job.with_workers(new_workers)
    return job

@dataclass(frozen=True, slots=True)
class WakeUp(Decision):
    """Ask the backend for one :class:`Tick` at time ``at_s`` (seconds, >= now).

    A one-shot timer for policies that must act at a time no other event marks
    (A-SRPT: a virtual-instance completion, the end of a delay window). Every
    WakeUp gives exactly one Tick (to every policy, like periodic ticks); a policy
    ignores ticks it did not ask for. Ticks are delivered after the other events
    of the same instant.
    """

    at_s: float


@dataclass(frozen=True, slots=True)
class SetFlowWeights(Decision):
    """Weights of jobs' flows in the weighted max-min allocator (job id -> weight > 0)."""

    weights: dict[int, float] = field(default_factory=dict)

    def to_json(self):
        return {"decision": "SetFlowWeights", "weights": {str(k): v for k, v in self.weights.items()}}


@dataclass(frozen=True, slots=True)
class SetFlowRates(Decision):
    """Explicit rates (bytes/s) per flow id; they replace the allocator for those flows."""

    rates: dict[tuple, float] = field(default_factory=dict)

    def to_json(self):
        return {"decision": "SetFlowRates", "flows": len(self.rates)}


# ---------------------------------------------------------------------------
# Policy base and registry
# ---------------------------------------------------------------------------


class Policy(ABC):
    """Base class of every scheduling policy.

    Class attributes:
        name: the policy id used in trial files (e.g. ``fifo``, ``asrpt``).
        description: one line shown by ``raytestbed policies``.
        role: ``placement`` or ``network``.

    Instance attribute ``tick_interval_s``: if not None, the backend sends a
    :class:`Tick` every that many seconds while jobs remain.

    ``predictions``: job id -> the iteration count ñ_i the policy predicted when the job
    arrived. A policy that predicts iteration counts sets its own dict in ``__init__`` and
    fills it while handling :class:`JobArrived`; it never changes an entry afterwards and never
    writes to the (shared) :class:`~raytestbed.core.job.Job`. Backends only read it: right after
    delivering a ``JobArrived`` they copy the entry into the job's record
    (:meth:`raytestbed.core.decisions.DecisionBook.note_predictions`), which becomes the
    ``predicted_iterations`` column of ``jobs.csv``. The default is empty and read-only.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    role: ClassVar[str] = "placement"
    predictions: Mapping[int, int] = MappingProxyType({})

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.tick_interval_s: float | None = None

    @abstractmethod
    def on_event(self, event: Event, view: ClusterView) -> list[Decision]:
        """React to one event; return the decisions to apply now (possibly none)."""

    def params(self) -> dict[str, Any]:
        """Parameters to record in results (override to add more)."""
        return {}


_REGISTRY: dict[str, type[Policy]] = {}
_DISCOVERED = False


def register_policy(cls: type[Policy]) -> type[Policy]:
    """Class decorator: make a policy available by its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"policy name {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    import raytestbed.schedulers as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name != "base":
            importlib.import_module(f"{pkg.__name__}.{mod.name}")
    _DISCOVERED = True


def available_policies() -> dict[str, type[Policy]]:
    """Policy id -> class, for every registered policy."""
    _discover()
    return dict(sorted(_REGISTRY.items()))


def make_policy(name: str, role: str | None = None, seed: int = 0, **params: Any) -> Policy:
    """Instantiate a policy by id; raise :class:`PolicyError` for an unknown id or bad params."""
    pols = available_policies()
    if name not in pols:
        known = ", ".join(n for n, c in pols.items() if role is None or c.role == role)
        raise PolicyError(f"unknown {role + ' ' if role else ''}policy {name!r} (available: {known})")
    cls = pols[name]
    if role is not None and cls.role != role:
        raise PolicyError(f"policy {name!r} is a {cls.role} policy, not a {role} policy")
    try:
        return cls(seed=seed, **params)
    except TypeError as e:
        raise PolicyError(f"policy {name!r}: bad parameters {sorted(params)}: {e}") from None
