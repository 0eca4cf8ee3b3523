"""``docs/results.md``: per paper, claim by claim — the paper's number, ours, the verdict, the command.

``raytestbed reproduce PAPER --write-docs`` rewrites the rows of the figures it ran inside the paper's
section (between ``<!-- results:PAPER -->`` and ``<!-- /results:PAPER -->``); rows of figures
it did not run are kept. The sections keep the papers' order; text outside them is kept.
"""

from __future__ import annotations

import re
from pathlib import Path

TITLES = {
    "asrpt": "A-SRPT (simulation study, §V-B): total JCT on the AAIC trace, 250 x 8 GPUs",
    "sjfbco": "SJF-BCO (MobiHoc'22, §7): makespan of 160 ring-all-reduce jobs on 20 servers",
    "gadget": "GADGET (INFOCOM'22, §VI): total utility on a 50-server fat-tree",
    "parrot": "Parrot (§6): total JCT of PS jobs on 128 servers, flow simulation",
    "gavel": "Gavel (OSDI'20, §7.2): average JCT vs input rate, LAS vs heterogeneity-aware LAS, 36 V100 + 36 P100 + "
             "36 K80",
}
ORDER = list(TITLES)
HEADER = """# Results: the papers' claims beside ours

Each row is one claim of a paper's figure: the paper's number or finding, ours, and the verdict
(**reproduced**, **partly** or **not reproduced**, with the reason). Every section is written by
the command under its heading, which runs the figures as sweeps (`docs/sweeps.md`, "Paper
reproductions"); the folder it names holds every run, the tables and the plots. Only full runs
write here (`--write-docs`); `--quick` is a smoke test without verdicts.
"""


def _cell(text: str) -> str:
    return str(text).replace("|", "/").replace("\n", " ")


def update(path: Path, paper: str, run: str, rows: list[dict[str, str]], figures: list[str]) -> None:
    """Write ``rows`` (figure, claim, ours, verdict) of ``figures`` into ``paper``'s section of ``path``.

    ``run``: ``quick`` or ``full`` (a column of each row: rows of other figures may stem from another run); a
    row's own ``run`` key (``partial``: a subset of the paper's setting) wins.
    """
    text = path.read_text(encoding="utf-8") if path.is_file() else HEADER
    sections = {p: _section(text, p) for p in ORDER}
    kept = [r for r in _rows(sections[paper]) if r.split(" | ")[0].lstrip("| ").strip() not in figures]
    new = [f"| {_cell(r['figure'])} | {_cell(r['claim'])} | {_cell(r['ours'])} | {_cell(r['verdict'])} "
           f"| {r.get('run', run)} |" for r in rows]
    order = {f: i for i, f in enumerate(figures)}
    body = sorted(kept + new, key=lambda line: order.get(line.split(" | ")[0].lstrip("| ").strip(), -1))
    sections[paper] = "\n".join([
        f"<!-- results:{paper} -->", f"## {TITLES[paper]}", "",
        f"Command: `raytestbed reproduce {paper} [--fig FIG] --write-docs` (run `full`: the paper's figures at "
        f"their full size; `partial`: a stated subset of that setting); folder `results/reproduce/{paper}/`, "
        "`reproduction.md` there has the full tables.", "",
        "| figure | the paper | ours | verdict | run |", "|---|---|---|---|---|", *body, f"<!-- /results:{paper} -->"])
    head = text.split("<!-- results:")[0].rstrip() + "\n" if "<!-- results:" in text else text.rstrip() + "\n"
    tail = text.rsplit("<!-- /results:", 1)[1].split("-->", 1)[1] if "<!-- /results:" in text else ""
    parts = [head] + [sections[p] + "\n" for p in ORDER if sections[p]] + ([tail.lstrip("\n")] if tail.strip() else [])
    path.write_text("\n".join(parts), encoding="utf-8")


def _section(text: str, paper: str) -> str:
    m = re.search(rf"<!-- results:{paper} -->.*?<!-- /results:{paper} -->", text, re.S)
    return m.group(0) if m else ""


def _rows(section: str) -> list[str]:
    lines = section.splitlines()
    return [ln for ln in lines if ln.startswith("| ") and not ln.startswith("| figure |")]


def verdict_counts(path: Path) -> dict[str, dict[str, int]]:
    """Per paper: how many claims are reproduced, partly, not reproduced (for a headline table)."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    out = {}
    for p in ORDER:
        rows = _rows(_section(text, p))
        v = [r.rstrip(" |").split(" | ")[-2] for r in rows]
        out[p] = {"reproduced": sum(x.startswith("reproduced") for x in v),
                  "partly": sum(x.startswith("partly") for x in v),
                  "not reproduced": sum(x.startswith("not") for x in v)}
    return out
