"""The papers' figures as sweep definitions (``raytestbed reproduce PAPER [--fig N] [--quick]``).

Each paper module defines :class:`~raytestbed.experiments.papers.figure.Figure` objects: a function that
builds the figure's :class:`~raytestbed.experiments.spec.Sweep` (full size, or ``quick``: a few minutes)
from the trial files in ``workloads/trials/``, the paper's claim as a sentence, and a function that
turns the figure's ``sweep.csv`` into our numbers beside the paper's (Markdown lines). A figure
that is not a simulation (e.g. a solver's approximation ratio) provides ``run`` instead of a sweep.
"""

from __future__ import annotations

from raytestbed.errors import ConfigError
from raytestbed.experiments.papers import asrpt, gadget, gavel, parrot, sjfbco
from raytestbed.experiments.papers.figure import Figure

_MODULES = {"asrpt": asrpt, "sjfbco": sjfbco, "gadget": gadget, "parrot": parrot, "gavel": gavel}


def papers() -> dict[str, list[Figure]]:
    """Paper id -> its figures, in the paper's order (on the paper's own workload)."""
    return {p: m.FIGURES for p, m in _MODULES.items()}


def workloads(paper: str) -> tuple[str, ...]:
    """The values of ``reproduce PAPER --workload`` (the first: the default; empty: the paper has no such option).

    A paper module that has them defines ``WORKLOADS`` and ``figures(workload)``: A-SRPT the trace its
    job sets are drawn from, GADGET the arrival pattern.
    """
    return tuple(getattr(_MODULES[paper], "WORKLOADS", ()))


def figures(paper: str, workload: str | None = None) -> list[Figure]:
    """The figures of ``paper`` on ``workload`` (None: the default); ConfigError for a value it does not take."""
    mod = _MODULES[paper]
    if workload is None:
        return mod.FIGURES
    known = workloads(paper)
    if workload not in known:
        raise ConfigError(f"--workload {workload}: " + (f"{paper} takes {', '.join(known)}" if known else
                                                         f"{paper} has no workload choice"))
    return mod.figures(workload)
