"""The four papers' figures as sweep definitions (``raytestbed reproduce PAPER [--fig N] [--quick]``).

Each paper module defines :class:`Figure` objects: a function that builds the figure's
:class:`~raytestbed.experiments.spec.Sweep` (full size, or ``quick``: a few minutes) from the
trial files in ``workloads/trials/``, the paper's claim as a sentence, and a function that
turns the figure's ``sweep.csv`` into our numbers beside the paper's (Markdown lines). A figure
that is not a simulation (e.g. a solver's approximation ratio) provides ``run`` instead of a sweep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from raytestbed.resources import package_dir
from raytestbed.experiments.spec import Sweep

TRIALS = package_dir("trials")


@dataclass(frozen=True)
class Claim:
    """One claim of a paper's figure and how to check ours against it.

    ``check(table, folder) -> (ours, verdict)``: our number(s) as a short text, and the verdict
    (``reproduced``, ``partly: why`` or ``not reproduced: why``) from the figure's ``sweep.csv``.
    """

    text: str
    check: Callable[[pd.DataFrame, Path], tuple[str, str]]


@dataclass(frozen=True)
class Figure:
    """One figure (or table) of a paper.

    ``sweep(quick)``: the figure's sweep; ``ours(table, folder)``: Markdown lines with our
    numbers, from the figure's ``sweep.csv`` (``table``) and sweep folder. ``run(folder, quick)``
    replaces both for a figure that is not a simulation sweep (it writes its own files and returns
    the Markdown lines).
    """

    paper: str
    id: str
    title: str
    claim: str
    sweep: Callable[[bool], Sweep] | None = None
    ours: Callable[[pd.DataFrame, Path], list[str]] | None = None
    run: Callable[[Path, bool], list[str]] | None = None
    default: bool = True  #: run by ``raytestbed reproduce PAPER`` without ``--fig``
    quick_note: str = ""  #: what ``--quick`` leaves out or shrinks
    claims: tuple[Claim, ...] = ()


def _modules() -> dict:
    from raytestbed.experiments.papers import asrpt, gadget, parrot, sjfbco

    return {"asrpt": asrpt, "sjfbco": sjfbco, "gadget": gadget, "parrot": parrot}


def papers() -> dict[str, list[Figure]]:
    """Paper id -> its figures, in the paper's order (on the paper's own workload)."""
    return {p: m.FIGURES for p, m in _modules().items()}


def workloads(paper: str) -> tuple[str, ...]:
    """The values of ``reproduce PAPER --workload`` (the first: the default; empty: the paper has no such option).

    A paper module that has them defines ``WORKLOADS`` and ``figures(workload)``: A-SRPT the trace its
    job sets are drawn from, GADGET the arrival pattern.
    """
    return tuple(getattr(_modules()[paper], "WORKLOADS", ()))


def figures(paper: str, workload: str | None = None) -> list[Figure]:
    """The figures of ``paper`` on ``workload`` (None: the default); ConfigError for a value it does not take."""
    from raytestbed.errors import ConfigError

    mod = _modules()[paper]
    if workload is None:
        return mod.FIGURES
    known = workloads(paper)
    if workload not in known:
        raise ConfigError(f"--workload {workload}: " + (f"{paper} takes {', '.join(known)}" if known else
                                                         f"{paper} has no workload choice"))
    return mod.figures(workload)


def pct(x: float) -> str:
    return f"{x:.1f} %"


def md_table(df: pd.DataFrame) -> str:
    """The project's one Markdown table writer (:func:`raytestbed.results.report.md_table`)."""
    from raytestbed.results.report import md_table as _md

    return _md(df)


def shape(values: list[float], tol: float = 1e-6) -> str:
    """Sequence of moves (drop / rise) of a curve, flat steps merged."""
    moves: list[str] = []
    for a, b in zip(values, values[1:]):
        if b < a - tol:
            m = "drop"
        elif b > a + tol:
            m = "rise"
        else:
            continue
        if not moves or moves[-1] != m:
            moves.append(m)
    return ", ".join(moves) if moves else "flat"


def cell_jobs(folder: Path, table: pd.DataFrame) -> pd.DataFrame:
    """Every cell's ``jobs.csv`` rows with a ``cell`` column (``folder``: the sweep folder; merge on ``cell``)."""
    frames = []
    for cell in table["cell"]:
        j = pd.read_csv(folder / "cells" / cell / "jobs.csv")
        j["cell"] = cell
        frames.append(j)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
