"""``raytestbed reproduce PAPER [--fig N] [--quick]``: a paper's figures through the sweep path.

Each figure of :mod:`raytestbed.experiments.papers` runs as a sweep into ``OUT/<fig>/`` (cells,
``sweep.csv``, mean and 95 % CI, plots, ``report.md``; resumable: re-running continues), then
``OUT/reproduction.md`` puts the paper's claim and our numbers side by side, figure by figure.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from raytestbed.errors import RaytestbedError
from raytestbed.experiments.papers import figures, papers, workloads
from raytestbed.experiments.papers.figure import Figure
from raytestbed.experiments.results_doc import update
from raytestbed.experiments.runner import failure_lines, open_ray, run_sweep
from raytestbed.results.tables import md_table


def select(paper: str, figs: str | None, workload: str | None = None) -> list[Figure]:
    """The figures of ``paper`` named in ``figs`` ("4", "fig4", "4,5"; None: the paper's default set),
    on ``workload`` (:func:`~raytestbed.experiments.papers.workloads`; None: the paper's own)."""
    known = papers()
    if paper not in known:
        raise RaytestbedError(f"reproduce: unknown paper {paper!r} (known: {', '.join(known)})")
    allf = figures(paper, workload)
    if not figs:
        return [f for f in allf if f.default]
    ids = {f.id: f for f in allf}
    out = []
    for x in figs.split(","):
        x = x.strip().lower()
        key = x if x in ids else f"fig{x}"
        if key not in ids:
            raise RaytestbedError(f"--fig {x}: {paper} has {', '.join(ids)}")
        out.append(ids[key])
    return out


@dataclass
class Reproduction:
    """What ``reproduce`` did: ``md`` (``reproduction.md``), ``failed`` (the failed cells, each with its
    ``error``), ``claims`` (figure, claim, ours[, verdict]: no verdict with ``quick``), ``results_md``
    (the results page written, or None) and ``not_written`` (why the page was left alone, or "")."""

    md: Path
    failed: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, str]] = field(default_factory=list)
    results_md: Path | None = None
    not_written: str = ""


def reproduce(paper: str, figs: str | None, quick: bool, out: Path, *, executor: str = "ray",
              address: str | None = None, workers: int | None = None, force: bool = False,
              show_progress: bool = True, results_md: Path | None = None,
              workload: str | None = None, reuse: tuple[str | Path, ...] = ()) -> Reproduction:
    """Run the figures and write ``out/reproduction.md`` and ``out/claims.csv``.

    ``quick``: a smoke test of the pipeline (small sizes): our numbers, no verdict, and never a results page.
    ``results_md``: a results page (``docs/results.md``) whose section of this paper gets the claims of
    the figures run (:mod:`raytestbed.experiments.results_doc`), only from a full run in which every cell
    finished and every claim was evaluated, and only on the paper's own workload (``workload`` None or
    the paper's first): the page records the papers' settings. ``workload``: another trace (A-SRPT) or
    arrival pattern (GADGET), see :func:`~raytestbed.experiments.papers.workloads`. ``reuse``: folders
    whose finished cells of the same fingerprint are copied in instead of run
    (:func:`~raytestbed.experiments.runner.run_sweep`); a cell that another figure has finished in ``out``
    is taken the same way (a baseline two figures share runs once), except with ``force``.
    """
    if quick and results_md is not None:
        raise RaytestbedError("--quick is a smoke test of the pipeline: it issues no verdict and never writes "
                              "the results page (drop --write-docs / --results-md, or --quick)")
    chosen = select(paper, figs, workload)
    if workload is not None and workload != workloads(paper)[0]:
        results_md = None
    else:
        workload = None
    out.mkdir(parents=True, exist_ok=True)
    session = None
    if executor == "ray":  # one Ray for every figure: its workers keep their parsed traces between figures
        session = open_ray(address, workers)
        if session is None:
            executor = "serial"
    try:
        return _reproduce(paper, chosen, quick, out, executor, address, workers, force, show_progress, results_md,
                          workload, tuple(reuse))
    finally:
        if session is not None:
            session.close()


def _reproduce(paper: str, chosen: list[Figure], quick: bool, out: Path, executor: str, address: str | None,
               workers: int | None, force: bool, show_progress: bool, results_md: Path | None,
               workload: str | None = None, reuse: tuple = ()) -> Reproduction:
    t0 = time.perf_counter()
    sections: dict[str, list[str]] = {}
    claims: list[dict[str, str]] = []
    failed: list[dict[str, Any]] = []
    for fig in chosen:
        folder = out / fig.id
        t1 = time.perf_counter()
        res = None
        if show_progress:
            print(f"reproduce {paper}: {fig.id} ({fig.title})", flush=True)
        if fig.run is not None:
            folder.mkdir(parents=True, exist_ok=True)
            ours = fig.run(folder, quick)
        else:
            # a cell another figure of this folder has finished (the same fingerprint) is copied, not run again
            res = run_sweep(fig.sweep(quick), folder, executor=executor, address=address, workers=workers,
                            show_progress=show_progress, force=force, report_failures=False,
                            reuse=reuse if force else (*reuse, out))
            failed += [{**f, "figure": fig.id} for f in res.failed]
            ours = fig.ours(res.table, folder) if res.table is not None and len(res.table) else ["(no cell finished)"]
        table = res.table if fig.run is None else None
        for c in fig.claims:
            if res is not None and res.failed:
                cells = len(res.failed) + len(res.ran) + len(res.kept)
                got, verdict = "-", f"not evaluated: {len(res.failed)} of {cells} cells failed"
            else:
                try:
                    got, verdict = c.check(table, folder)
                except Exception as e:  # noqa: BLE001 - a claim we cannot evaluate
                    got, verdict = "-", f"not evaluated: {type(e).__name__}: {e}"
            row = {"figure": fig.id, "claim": c.text, "ours": got}
            if not quick:  # a smoke test issues no verdict
                row["verdict"] = f"{verdict} (partial run: {fig.partial})" if fig.partial else verdict
            claims.append(row)
        where = (f"Files: `{fig.id}/`" if fig.run is not None else
                 f"Sweep folder: `{fig.id}/` (report: [{fig.id}/report.md]({fig.id}/report.md))")
        sections[fig.id] = [f"## {fig.id}: {fig.title}", "", f"Paper: {fig.claim}", "", *ours,
                            f"{where}; {time.perf_counter() - t1:.0f} s.", ""]
        _write(out, paper, quick, chosen, sections, claims, workload)
    columns = ["figure", "claim", "ours"] + ([] if quick else ["verdict"])
    pd.DataFrame(claims, columns=columns).to_csv(out / "claims.csv", index=False)
    rep = Reproduction(out / "reproduction.md", failed, claims)
    if results_md is not None:
        unevaluated = [c for c in claims if str(c.get("verdict", "")).startswith("not evaluated")]
        if failed:
            rep.not_written = f"{len(failed)} cell(s) failed"
        elif unevaluated:
            rep.not_written = f"{len(unevaluated)} claim(s) could not be evaluated"
        else:
            partial = {f.id for f in chosen if f.partial}
            update(results_md, paper, "full", [{**c, "run": "partial" if c["figure"] in partial else "full"}
                                               for c in claims], [f.id for f in chosen])
            rep.results_md = results_md
    print(f"reproduce {paper}: {len(chosen)} figure(s) in {time.perf_counter() - t0:.0f} s"
          + (f"; {len(failed)} cell(s) failed" if failed else "")
          + ("; --quick: a smoke test of the pipeline, no verdict" if quick else ""))
    for line in failure_lines(failed):
        print(f"raytestbed: {line}", file=sys.stderr)
    return rep


def _write(out: Path, paper: str, quick: bool, chosen: list[Figure], sections: dict[str, list[str]],
           claims: list[dict[str, str]], workload: str | None = None) -> None:
    mode = "--quick: a smoke test of the pipeline, no verdict" if quick else "full size"
    notes = [f"- {f.id}: {f.quick_note}" for f in chosen if quick and f.quick_note]
    on = f", workload {workload}" if workload else ""
    lines = [f"# {paper}: reproduction ({mode}{on})", "",
             f"Command: `raytestbed reproduce {paper} --fig {','.join(f.id for f in chosen)}"
             f"{' --quick' if quick else ''}{f' --workload {workload}' if workload else ''}`.", ""]
    if quick:
        lines += ["`--quick` checks that every figure runs end to end at small sizes; its numbers are not the "
                  "paper's setting, so no claim gets a verdict here (run without `--quick` for verdicts).", ""]
    if notes:
        lines += ["`--quick` shrinks the figures:", *notes, ""]
    if claims:
        lines += ["## Claims", "", md_table(pd.DataFrame(claims)), ""]
    for f in chosen:
        lines += sections.get(f.id, [])
    (out / "reproduction.md").write_text("\n".join(lines), encoding="utf-8")
