"""A full reproduction runs the setting docs/results.md says it runs.

Each case builds a figure's full-mode sweep, reads its cluster, job counts, grid and seeds from the
cells, writes them the way the results page writes them, and looks for that text in the page's row
(or the paper's "Setting throughout" paragraph) under "At the papers' scale". A sweep changed without
the page (or the page without the sweep) fails here.
"""

import re
from pathlib import Path

import pytest

from raytestbed.config import REPO_ROOT, parse_trial
from raytestbed.experiments.papers import asrpt, gavel, parrot, sjfbco

PAGE = (REPO_ROOT / "docs" / "results.md").read_text(encoding="utf-8")


def _section(paper: str) -> str:
    """The paper's part of "At the papers' scale" (up to the next heading)."""
    scale = PAGE[PAGE.index("## At the papers' scale"):PAGE.index("## Appendix")]
    start = scale.index(f"### {paper}")
    end = scale.find("\n### ", start + 1)
    return scale[start:end if end > 0 else None]


def _row(paper: str, prefix: str) -> str:
    rows = [line for line in _section(paper).splitlines() if line.startswith(f"| {prefix}")]
    assert len(rows) == 1, f"{paper}: {len(rows)} rows start with {prefix!r}"
    return rows[0]


def _cells(fig_sweep):
    return fig_sweep(False).cells()


def _cluster(cell):
    return parse_trial(cell.data, "setting", Path(cell.path)).cluster_config.build()


def _seeds(cells) -> str:
    s = sorted({c.seed for c in cells})
    assert s == list(range(s[0], s[-1] + 1))
    return f"seeds {s[0]}–{s[-1]}"


def _axis(cells, name: str) -> list:
    return sorted({dict(c.point)[name] for c in cells})


def _join(values, fmt: str = "") -> str:
    text = [f"{v:{fmt}}" for v in values]
    return ", ".join(text[:-1]) + " and " + text[-1] if len(text) > 1 else text[0]


def _homogeneous(cell) -> str:
    cl = _cluster(cell)
    gpus = {s.gpus for s in cl.servers}
    assert len(gpus) == 1
    return f"{len(cl.servers)} × {gpus.pop()} GPUs"


def _asrpt_cells(sweep, row: str, trace: str = "aaic"):
    """The full-mode cells of an A-SRPT figure on the workload its row's command (the last column) names
    (``--workload aaic-window``: a row run with the predictors fitted on the 20,000 rows before each set)."""
    named = re.search(r"--workload ([a-z-]+)", row.rstrip(" |").rsplit(" | ", 1)[-1])
    return _cells(lambda quick: sweep(quick, named.group(1) if named else trace))


def _history(cells) -> str:
    wl = cells[0].data["workload"]
    if wl["history_span"] == "all":
        return "every trace row before each set as history"
    return f"{wl['history_jobs']:,} trace jobs before each set as history"


def test_asrpt_fig6_runs_the_setting_of_its_row():
    row = _row("A-SRPT", "Fig. 6 at the paper's four job counts")
    cells = _asrpt_cells(asrpt.jobs_sweep, row)
    for text in (_homogeneous(cells[0]), f"{_join(_axis(cells, 'jobs'), ',')} consecutive AAIC jobs",
                 _history(cells), _seeds(cells)):
        assert text in row, text
    assert len(cells) == 4 * (len(asrpt.POLICIES) + len(asrpt.READING_LINES)) * 5
    for reading in asrpt.READINGS:
        assert f"`{reading}`" in row, reading


def _asrpt_75k_row(cells, row: str) -> None:
    """The cluster, set size, history, offered load(s) and seeds of an A-SRPT figure at 75,000 jobs are in ``row``."""
    wl = cells[0].data["workload"]
    loads = _axis(cells, "workload.offered_load") if "workload.offered_load" in dict(cells[0].point) else \
        [wl["offered_load"]]
    for text in (f"{_homogeneous(cells[0])}, {wl['jobs']:,} jobs", _history(cells),
                 f"offered load {_join(loads)}", _seeds(cells)):
        assert text in row, text


def test_asrpt_load_axis_runs_the_setting_of_its_row():
    row = _row("A-SRPT", "Load axis (our addition: the paper gives no load), AAIC")
    _asrpt_75k_row(_asrpt_cells(asrpt.load_sweep, row), row)



def test_asrpt_fig7_runs_the_setting_of_its_row():
    row = _row("A-SRPT", "Fig. 7: single-GPU share, AAIC")
    cells = _asrpt_cells(asrpt.single_sweep, row)
    _asrpt_75k_row(cells, row)
    assert f"single-GPU share {_join(sorted(_axis(cells, 'workload.single_gpu_share'), reverse=True), 'g')}" in row
    assert f"({len(cells)} cells" in row


def test_asrpt_fig8_runs_the_setting_of_its_row():
    row = _row("A-SRPT", "Fig. 8: NIC bandwidth, AAIC")
    cells = _asrpt_cells(asrpt.nic_sweep, row)
    _asrpt_75k_row(cells, row)
    wl = cells[0].data["workload"]
    assert wl["single_gpu_share"] == 0 and "(share 0)" in row
    assert f"`plan_nic_gbps: {wl['plan_nic_gbps']:g}`" in row
    assert f"run at NIC {_join(_axis(cells, 'cluster.nic_gbps'), 'g')} Gbps" in row
    assert f"({len(cells)} cells" in row

def test_sjfbco_figures_run_the_setting_of_their_rows():
    cells = {f.id: _cells(f.sweep) for f in sjfbco.FIGURES}
    cl = _cluster(cells["fig4"][0])
    sizes = "/".join(str(g) for g in sorted({s.gpus for s in cl.servers}))
    assert f"{len(cl.servers)} servers of {sizes} GPUs, {cl.total_gpus} GPUs" in _section("SJF-BCO")
    kappa = _axis(cells["fig5"], "policy_params.sjf-bco.kappa")
    servers = _axis(cells["fig6"], "servers")
    lam = _axis(cells["fig7"], "policy_params.sjf-bco.lam")
    expected = {"Fig. 4": f"Fig. 4, {_seeds(cells['fig4'])}",
                "Fig. 5": f"κ = {kappa[0]} … {kappa[-1]}, {_seeds(cells['fig5'])}",
                "Fig. 6": f"{servers[0]} → {servers[-1]} servers, {_seeds(cells['fig6'])}",
                "Fig. 7": f"κ = 1, {_seeds(cells['fig7'])}"}
    for prefix, text in expected.items():
        assert text in _row("SJF-BCO", prefix), text
    assert f"(λ = {', '.join(f'{v:g}' for v in lam)})" in _row("SJF-BCO", "Fig. 7")


def test_parrot_figures_run_the_setting_of_their_rows():
    cells = {f.id: _cells(f.sweep) for f in parrot.FIGURES}
    assert f"{len(_cluster(cells['fig5'][0]).servers)} servers" in _section("Parrot")
    for fig, prefix in (("fig5", "Fig. 5, scale"), ("fig5-full-iterations", "Fig. 5 with every trace iteration:"),
                        ("fig7", "Fig. 7: observation"), ("fig7-full-iterations", "Fig. 7 with every trace iteration:"),
                        ("fig8", "Fig. 8:"), ("fig8-full-iterations", "Fig. 8 with every trace iteration:"),
                        ("fig9", "Fig. 9:"), ("fig9-full-iterations", "Fig. 9 with every trace iteration:"),
                        ("fig10", "Fig. 10:"),
                        ("fig10-full-iterations", "Fig. 10 with every trace iteration:")):
        wl = cells[fig][0].data["workload"]
        assert f"scale {wl['iteration_scale']:g}" in _row("Parrot", prefix) and _seeds(cells[fig]) in _row("Parrot", prefix)
    mus = ", ".join(str(v) for v in _axis(cells["fig9"], "workload.mean_gap_s"))
    assert f"{cells['fig9'][0].data['workload']['jobs']} jobs" in _row("Parrot", "Fig. 9:")
    assert f"μ = {mus} s" in _row("Parrot", "Fig. 9:")
    for fig, prefix in (("fig8", "Fig. 8:"), ("fig8-full-iterations", "Fig. 8 with every trace iteration:")):
        thetas = sorted({c.data["policy_params"].get("parrot", {}).get("theta_max") for c in cells[fig]} - {None})
        assert f"θ_max {thetas[0]:g}–{thetas[-1]:g}" in _row("Parrot", prefix)
    for fig, prefix in (("fig7", "Fig. 7: observation"), ("fig7-full-iterations", "Fig. 7 with every trace iteration:")):
        etas = _join([f"{v:g}" for v in _axis(cells[fig], "eta_ms")])
        assert f"η = {etas.replace(' and ', ', ')} ms" in _row("Parrot", prefix)
        nics = {f"{v:g}G" for v in _axis(cells[fig], "cluster.nic_gbps")}
        assert nics == {"10G", "40G"}
    assert "10G and 40G" in _row("Parrot", "Fig. 7 with every trace iteration:")
    full9 = cells["fig9-full-iterations"]
    assert _axis(full9, "workload.mean_gap_s") == _axis(cells["fig9"], "workload.mean_gap_s")
    assert f"{full9[0].data['workload']['jobs']} jobs" in _row("Parrot", "Fig. 9 with every trace iteration:")
    assert f"μ = {mus} s" in _row("Parrot", "Fig. 9 with every trace iteration:")
    deltas = ", ".join(str(v) for v in _axis(cells["fig10"], "workload.ps_max"))
    assert f"Δ = {deltas}" in _row("Parrot", "Fig. 10:")
    assert _axis(cells["fig10-full-iterations"], "workload.ps_max") == _axis(cells["fig10"], "workload.ps_max")
    assert f"Δ = {deltas}" in _row("Parrot", "Fig. 10 with every trace iteration:")
    for fig in ("fig5", "fig5-full-iterations"):
        assert {c.policy for c in cells[fig]} >= set(parrot.SCHEMES) | set(parrot.READINGS)
    scales = _axis(cells["fig5-scales"], "iteration_scale")
    row = _row("Parrot", "Fig. 5, 10G: 5 iteration scales")
    assert f"{len(scales)} iteration scales ({_join(scales, 'g')}, arrivals compressed alike)" in row
    assert _seeds(cells["fig5-scales"]) in row and f"{len(cells['fig5-scales']) // 3} runs" in row
    load = cells["fig5-load"]
    arrivals = _axis(load, "workload.arrival_scale")
    row = _row("Parrot", "Fig. 5 lower bound against the load")
    assert f"scale {load[0].data['workload']['iteration_scale']:g}, 10G" in row and _seeds(load) in row
    assert f"(arrival scale {arrivals[0]:g}) to {arrivals[-1] / arrivals[0]:g} × ({arrivals[-1]:g})" in row
    assert {dict(c.point)["cluster.nic_gbps"] for c in [*load, *cells["fig5-scales"]]} == {10.0}
    full = cells["fig5-full-iterations"][0].data["workload"]
    assert full["iteration_scale"] == full["arrival_scale"] == 1.0  # "iterations and arrivals as in the trace"


def test_gavel_full_figures_run_the_setting_of_their_rows():
    cl = _cluster(_cells(gavel.FIGURES[0].sweep)[0])
    counts = {}
    for s in cl.servers:
        counts[s.gpu_type] = counts.get(s.gpu_type, 0) + s.gpus
    cluster = " + ".join(f"{n} {t.upper()}" for t, n in counts.items())
    assert cluster in _section("Gavel (Figures 8 and 9: LAS vs heterogeneity-aware LAS)")
    for fig, prefix in zip(gavel.FIGURES[:2], ("Fig. 8 in full, lower at every rate", "Fig. 9 in full, lower at every rate")):
        row = _row("Gavel (Figures 8 and 9: LAS vs heterogeneity-aware LAS)", prefix)
        cells = _cells(fig.sweep)
        rates = _axis(cells, "rate_per_hour")
        seeds = sorted({c.seed for c in cells})
        text = f"{len(rates)} rates ({rates[0]:g}–{rates[-1]:.1f} jobs/h), {len(seeds)} seeds each ({seeds[0]}–{seeds[-1]})"
        assert text in row, text


@pytest.mark.parametrize("prefix", ["Fig. 6 at the paper's four job counts"])
def test_a_changed_sweep_would_fail(prefix, monkeypatch):
    """The check can fail: a sweep of other job counts no longer matches the row."""
    monkeypatch.setattr(asrpt, "_sizes", lambda quick, real=asrpt._sizes: {**real(quick), "jobs": [1_000, 2_000]})
    with pytest.raises(AssertionError):
        test_asrpt_fig6_runs_the_setting_of_its_row()


def test_asrpt_google_load_axis_runs_the_setting_of_its_row():
    row = _row("A-SRPT", "Load axis (our addition), Google 2011")
    cells = _asrpt_cells(asrpt.load_sweep, row, "google")
    wl = cells[0].data["workload"]
    assert wl["kind"] == "google" and wl["gpus_from"] == "aaic"
    _asrpt_75k_row(cells, row)


def test_gadget_figures_run_the_setting_of_their_rows():
    from raytestbed.experiments.papers import gadget

    figs = {f.id: f for f in gadget.figures()}
    cells = {k: _cells(f.sweep) for k, f in figs.items() if f.sweep is not None}
    cl = _cluster(cells["fig4"][0])
    section = _section("GADGET")
    assert f"{len(cl.servers)} servers, {cl.total_gpus} GPUs, {len(cl.racks)} racks" in section
    wl = cells["fig4"][0].data["workload"]
    assert f"T = {wl['slots']}\nslots of {wl['slot_s']:g} s" in section
    row = _row("GADGET", "Fig. 4 with Poisson arrivals")
    counts = " / ".join(str(n) for n in _axis(cells["fig4"], "workload.jobs"))
    assert f"{counts} jobs, {_seeds(cells['fig4'])}" in row and _seeds(cells["fig4-literal"]) in row
    assert {c.data["workload"]["budget_mode"] for c in cells["fig4-literal"]} == {"literal"}
    assert _seeds(cells["fig4-lambda2-slot"]) in row and "`fig4-lambda2-slot`" in row
    assert {c.data["workload"]["lambda2_unit"] for c in cells["fig4-lambda2-slot"]} == {"worker_slot"}
    assert _axis(cells["fig4-lambda2-slot"], "workload.jobs") == _axis(cells["fig4"], "workload.jobs")
    real = _row("GADGET", "Fig. 4 with a real trace's arrival pattern")
    for arrivals in gadget.WORKLOADS[1:]:
        fig4 = next(f for f in gadget.figures(arrivals) if f.id == "fig4")
        real_cells = _cells(fig4.sweep)
        assert f"{counts} jobs, {_seeds(real_cells)}" in real, arrivals
        assert f"--workload {arrivals}`" in real or f"`{arrivals}`" in real, arrivals
    n = cells["fig5"][0].data["workload"]
    assert f"Figs. 5–6, {n['jobs']} jobs over T = {n['slots']} slots, {_seeds(cells['fig5'])}" in _row("GADGET", "Figs. 5–6")


def test_asrpt_fig9_runs_the_setting_of_its_row():
    row = _row("A-SRPT", "Fig. 9: predictors, AAIC")
    cells = _asrpt_cells(asrpt.predictor_sweep, row)
    _asrpt_75k_row(cells, row)
    assert f"({len(cells)} cells" in row
    assert {"asrpt", "asrpt-perfect", "asrpt[median]", "asrpt[mean]"} <= {c.policy for c in cells}
