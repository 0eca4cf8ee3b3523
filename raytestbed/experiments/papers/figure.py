"""What a paper's figure is (:class:`Figure`, its :class:`Claim` objects) and the helpers its module uses
to turn a sweep's results into our numbers beside the paper's; the paper modules import it, the
registry (:mod:`raytestbed.experiments.papers`) lists them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from raytestbed.experiments.spec import Sweep
from raytestbed.experiments.tables import ci95
from raytestbed.resources import package_dir

#: The trial files the figures start from (``workloads/trials/``).
TRIALS = package_dir("trials")
#: Sweep arguments of every paper figure: no events.jsonl, no decisions.jsonl per cell (the tables read
#: jobs.csv and summary.json; a full-size cell's logs run to 100 MB)
NO_CELL_LOGS = {"log_events": False, "log_decisions": False}


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
    partial: str = ""  #: a subset of the paper's setting: what it leaves out (its results-page rows say ``partial``)
    claims: tuple[Claim, ...] = ()


def per_reading(check: Callable[[pd.DataFrame, Path], tuple[str, str]], readings: dict[str, dict[str, str]]):
    """``check`` on the lines as run, then under every reading in ``readings`` (name -> {line label: the
    line it stands in for}: those rows are taken as that line's): the verdict is the first's, the others'
    follow in brackets. A reading whose lines are not all in the table is left out."""
    extra = {label for lines in readings.values() for label in lines}

    def run(df: pd.DataFrame, folder: Path) -> tuple[str, str]:
        ran = set(df["policy"])
        ours, verdict = check(df[~df["policy"].isin(extra)], folder)
        others = []
        for name, lines in readings.items():
            if not set(lines) <= ran:
                continue
            d = df[~df["policy"].isin(set(lines.values()) | (extra - set(lines)))]
            o, v = check(d.replace({"policy": lines}), folder)
            ours += f" [{name}: {o}]"
            others.append(f"{name}: {v}")
        return ours, verdict + (f" [other readings: {'; '.join(others)}]" if others else "")
    return run


def run_seeds(full: list[int], quick: bool) -> list[int]:
    """The seeds a figure runs: all of ``full``, or its first only for ``--quick`` (a smoke test)."""
    return list(full[:1]) if quick else list(full)


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


def ci_shape(wide: pd.DataFrame) -> str | None:
    """The moves (drop / rise) of a curve measured on several seeds that hold over the 95 % CI.

    ``wide``: seeds x points (columns in the curve's order). Walking along the mean curve from the
    last turning point (the extreme of the current move so far), a point starts a new move when its
    per-seed difference to that turning point has a 95 % Student-t CI that excludes 0; a move that
    continues only moves the turning point. So noise between seeds cannot add a turn, and a turn the
    paper reports counts only if the seeds agree on it. None: fewer than two seeds.
    """
    if len(wide.dropna()) < 2:
        return None
    mean = wide.mean()
    cols = list(wide.columns)
    moves: list[str] = []
    turn = cols[0]
    for x in cols[1:]:
        if moves and ((moves[-1] == "drop" and mean[x] < mean[turn]) or (moves[-1] == "rise" and mean[x] > mean[turn])):
            turn = x
            continue
        d = (wide[x] - wide[turn]).dropna().to_numpy()
        h = ci95(d)
        if abs(d.mean()) > h:
            m = "drop" if d.mean() < 0 else "rise"
            if not moves or moves[-1] != m:
                moves.append(m)
            turn = x
    return ", ".join(moves) if moves else "flat"


def cell_jobs(folder: Path, table: pd.DataFrame) -> pd.DataFrame:
    """Every cell's ``jobs.csv`` rows with a ``cell`` column (``folder``: the sweep folder; merge on ``cell``)."""
    frames = []
    for cell in table["cell"]:
        j = pd.read_csv(folder / "cells" / cell / "jobs.csv")
        j["cell"] = cell
        frames.append(j)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
