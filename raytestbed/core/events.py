"""What backends and policies exchange: events (backend -> policy), decisions (policy -> backend), faults.

A policy is a small object with one method, ``decisions = policy.on_event(event, view)``
(:class:`raytestbed.core.policy.Policy`). Both backends (the simulator and the emulated
cluster) deliver the same events and accept the same decisions. Times are seconds on the
backend's clock (virtual time in both backends).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from raytestbed.core.job import Job
from raytestbed.core.placement import Placement

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
class CoflowEvent(Event):
    """Base of the coflow events: ``job_id``, ``coflow_id``, ``bytes`` (bytes)."""

    job_id: int
    coflow_id: tuple
    bytes: float

    def to_json(self):
        return {"t": self.time, "event": self.kind, "job": self.job_id, "coflow": list(self.coflow_id),
                "bytes": self.bytes}


@dataclass(frozen=True, slots=True)
class CoflowStarted(CoflowEvent):
    """A coflow's first transfer began; ``bytes``: the whole coflow's (every transfer of it)."""


@dataclass(frozen=True, slots=True)
class CoflowGrew(CoflowEvent):
    """Transfers of a coflow that had already started began: flows joined it after its ``CoflowStarted``
    (a worker that pushes after the first one did, a parameter server that pulls after another, a ring
    all-reduce's next step). A network policy rates the flows present when it decides; this lets it rate
    the ones that joined. At most one per coflow per instant, and none in the instant of its
    ``CoflowStarted`` (that one already shows every flow that starts then). ``bytes``: the whole
    coflow's, as ``CoflowStarted`` gives it."""


@dataclass(frozen=True, slots=True)
class CoflowFinished(CoflowEvent):
    """All of a coflow's transfers have arrived; ``bytes``: what they moved."""


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


@dataclass(frozen=True, slots=True)
class Fault:
    """A fault to inject at ``time_s`` (seconds) on server ``target``: ``kill_server`` (the server dies
    for good) or ``slow_nic`` (its NIC runs ``factor`` x slower in both directions from then on)."""

    kind: str
    target: int
    time_s: float
    factor: float = 1.0
