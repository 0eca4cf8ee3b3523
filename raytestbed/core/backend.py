"""What a backend is: something that runs a trial's jobs under its policies and returns a :class:`RunResult`.

:func:`raytestbed.trial.run_into` builds the cluster, the jobs and the policies from a trial file,
hands them to a backend as one :class:`TrialRun`, and writes what :meth:`Backend.run` returns. It
never asks which backend it holds: what differs between the simulator (:mod:`raytestbed.sim.backend`)
and the emulator (:mod:`raytestbed.emu.backend`) lives behind this protocol — the trial settings a
backend cannot honour (:meth:`Backend.refusal`), its modes, and the extra ``jobs.csv`` columns, files
and ``summary.json`` entries it carries on its result. The backends are found by name in
:mod:`raytestbed.backends`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from raytestbed.core.cluster import Cluster
from raytestbed.core.decisions import BusyInterval, JobRecord
from raytestbed.core.eventcore import RunResult
from raytestbed.core.events import Decision, Event, Fault
from raytestbed.core.gpu_types import GpuSpeeds
from raytestbed.core.job import Job
from raytestbed.core.policy import Policy
from raytestbed.core.profile import ModelProfile
from raytestbed.core.timing import IterationModel


class LiveBooks(Protocol):
    """The books of a running trial, read whenever a job finishes (the journal of :mod:`raytestbed.trial`)."""

    records: dict[int, JobRecord]  #: job id -> its record so far
    busy: list[BusyInterval]  #: (job, start_s, end_s, gpus) of every GPU-holding interval closed so far

    def job_extra(self, jid: int) -> dict[str, Any] | None:
        """The backend's own columns of a finished job (journaled with it), or None."""


@dataclass
class TrialRun:
    """Everything a backend needs for one run: what to run, under which policies, and whom to tell.

    ``trial``: the trial's settings (:class:`raytestbed.config.Trial`; each backend reads its own
    sections: ``timing`` for the simulator, ``emu`` for the emulator; ``timing.restore_s`` for both).
    ``speeds``: the per-type speeds policies read (``view.speeds``) and both backends charge (the
    simulator's timing; every worker program at its GPU type's factor). Times are seconds.
    """

    cluster: Cluster
    jobs: Sequence[Job]
    policy: Policy
    network_policy: Policy | None
    trial: Any
    faults: Sequence[Fault]
    model: IterationModel
    speeds: GpuSpeeds
    on_event: Callable[[Event], None] | None = None
    on_decisions: Callable[[Event, str, float, list[Decision]], None] | None = None
    progress: Callable[[int, int], None] | None = None  #: (finished jobs, all jobs)
    on_books: Callable[[LiveBooks], None] | None = None  #: called once, before the first event
    #: the trial's per-layer model profiles by model name (real compute maps stages to layers with them);
    #: None: the shipped ones
    profiles: Mapping[str, ModelProfile] | None = None
    seed: int = 0  #: the run's seed (the simulator's compute noise draws from it)

    @property
    def policies(self) -> list[Policy]:
        """The placement policy, then the network policy if there is one."""
        return [p for p in (self.policy, self.network_policy) if p is not None]


class Backend(Protocol):
    """A way to run a trial (see the module docstring)."""

    name: ClassVar[str]  #: as ``--backend`` names it
    modes: ClassVar[tuple[str, ...]]  #: what may follow ``name:`` (e.g. ``sim:flow``)
    clock: ClassVar[str]  #: the word for its seconds in progress lines (``simulated``, ``emulated``)
    progress_step: ClassVar[int]  #: finished jobs between progress-bar updates
    reads_jobs: ClassVar[bool]  #: whether :meth:`refusal` looks at the jobs (else it may get None)
    #: whether a run starts a Ray cluster of its own: a sweep runs such cells one after the other in its
    #: own process (never as tasks inside the sweep's Ray), after the others
    starts_ray: ClassVar[bool]

    def missing(self) -> str | None:
        """None if the backend's parts are installed, else a one-line reason."""

    def with_mode(self, trial: Any, mode: str) -> Any:
        """``trial`` with the mode of ``name:mode`` applied."""

    def refusal(self, trial: Any, network_policies: Sequence[str], jobs: Sequence[Job] | None,
                speeds: GpuSpeeds | None) -> str | None:
        """Why this backend cannot honour the trial (one line), or None: a backend refuses before the run
        instead of ignoring a setting. ``jobs`` / ``speeds``: None where not known yet (checked when given)."""

    def session(self, trial: Any, cluster: Cluster) -> AbstractContextManager[None]:
        """What several runs of one trial on one cluster share, held open around them (a comparison's
        policies): the emulator's Ray session, started once instead of once per policy; nothing for
        the simulator."""

    def run(self, run: TrialRun) -> RunResult:
        """Run the trial's jobs to their end; the result carries the backend's extra columns and files."""
