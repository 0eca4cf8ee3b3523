"""raytestbed reproduce: every paper figure is a valid sweep; a figure run through the sweep path gives
what the paper's setting gives when simulated directly; the comparison tables."""

import math

import pandas as pd
import pytest

from raytestbed.cli import main
from raytestbed.experiments.papers import papers
from raytestbed.experiments.reproduce import reproduce


@pytest.mark.parametrize("paper", ["asrpt", "sjfbco", "gadget", "parrot", "gavel"])
def test_every_figure_is_a_valid_sweep_and_quick_is_smaller(paper):
    figs = papers()[paper]
    assert figs and any(f.default for f in figs)
    for f in figs:
        if f.sweep is None:
            assert f.run is not None
            continue
        quick, full = f.sweep(True).cells(), f.sweep(False).cells()  # every cell's trial validated
        assert 0 < len(quick) <= len(full)
        assert all(c.backend.startswith("sim") for c in full)
        assert len({c.key for c in full}) == len(full)


def test_sjfbco_fig7_through_the_sweep_path_equals_a_direct_simulation(tmp_path):
    pytest.importorskip("highspy")
    from raytestbed.core.timing import SjfbcoModel, SjfbcoParams
    from raytestbed.config import load_cluster, REPO_ROOT
    from raytestbed.schedulers.base import make_policy
    from raytestbed.sim.engine import Simulator
    from raytestbed.traces.datadir import find_data_dir
    from raytestbed.traces.sjfbco_workload import SjfbcoWorkloadParams, sjfbco_jobs

    if find_data_dir() is None:
        pytest.skip("shared/data not available")
    text = reproduce("sjfbco", "7", True, tmp_path / "r", executor="serial", show_progress=False).md.read_text()
    assert "Paper: With kappa = 1, the makespan decreases monotonically" in text and "Ours: shape" in text
    df = pd.read_csv(tmp_path / "r" / "fig7" / "sweep.csv")
    assert sorted(df["policy_params.sjf-bco.lam"]) == [1.0, 2.0, 4.0, 8.0]
    # the paper's setting planned and simulated directly (the former reproduction script's execute())
    model = dict(xi1=1.0, xi2_s=1e-4, degradation_alpha=1.0)
    cluster = load_cluster(REPO_ROOT / "cluster_configs" / "sjfbco_20servers.yaml").build()
    jobs = sjfbco_jobs(SjfbcoWorkloadParams(durations="philly"), 0, cluster.nic_bps, find_data_dir())
    pol = make_policy("sjf-bco", "placement", seed=0, **model, horizon_s=1200, kappa=1, lam=4.0)
    res = Simulator(cluster, jobs, pol, model=SjfbcoModel(SjfbcoParams(**model)), iterations_per_coflow=50).run()
    direct = max(r.finish_s for r in res.records)
    assert df.loc[df["policy_params.sjf-bco.lam"] == 4.0, "makespan_s"].iloc[0] == direct
    # re-running finds every cell finished: no cell folder is written again
    stamps = sorted(p.stat().st_mtime_ns for p in (tmp_path / "r" / "fig7" / "cells").rglob("summary.json"))
    reproduce("sjfbco", "fig7", True, tmp_path / "r", executor="serial", show_progress=False)
    assert sorted(p.stat().st_mtime_ns for p in (tmp_path / "r" / "fig7" / "cells").rglob("summary.json")) == stamps


def test_parrot_tables_compare_each_setting():
    from raytestbed.experiments.papers.parrot import reductions, theta_table

    nan = math.nan
    d = pd.DataFrame([
        {"policy": "parrot[theta_max=0.6]", "cluster.nic_gbps": 10.0, "total_jct_s": 80.0, "ratio_to_lb": 2.0},
        {"policy": "parrot[theta_max=0.9]", "cluster.nic_gbps": 10.0, "total_jct_s": 90.0, "ratio_to_lb": 2.25},
        {"policy": "aalo", "cluster.nic_gbps": 10.0, "total_jct_s": 100.0, "ratio_to_lb": nan},
        {"policy": "lccf", "cluster.nic_gbps": 10.0, "total_jct_s": 120.0, "ratio_to_lb": 3.0},
    ]).assign(seed=1)  # one seed, as a sweep table has it
    t = theta_table(d)
    assert list(t.theta_max) == [0.6, 0.9]
    assert list(t["parrot_vs_aalo_%"]) == pytest.approx([20.0, 10.0])
    assert list(t["parrot_vs_lccf_%"]) == pytest.approx([100 / 3, 25.0])
    r = reductions(d.replace({"parrot[theta_max=0.6]": "parrot"}), ["cluster.nic_gbps"])
    assert r["parrot_vs_aalo_%"].iloc[0] == pytest.approx(20.0) and r["parrot_x_lb"].iloc[0] == 2.0


def test_unknown_figure_is_a_one_line_error(tmp_path, capsys):
    assert main(["reproduce", "sjfbco", "--fig", "9", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--fig 9" in err and "fig4" in err


def test_results_page_rows_are_replaced_per_figure_and_other_sections_kept(tmp_path):
    from raytestbed.experiments.results_doc import update, verdict_counts

    page = tmp_path / "results.md"
    row = lambda f, v: {"figure": f, "claim": f"claim of {f}", "ours": "1 | 2", "verdict": v}  # noqa: E731
    update(page, "parrot", "quick", [row("fig5", "reproduced"), row("fig9", "partly: x")], ["fig5", "fig9"])
    update(page, "sjfbco", "full", [row("fig4", "not reproduced: y")], ["fig4"])
    update(page, "parrot", "full", [row("fig9", "reproduced")], ["fig9"])
    text = page.read_text()
    assert text.index("results:sjfbco") < text.index("results:parrot")  # the papers' order
    assert "| fig5 | claim of fig5 | 1 / 2 | reproduced | quick |" in text  # kept, '|' escaped
    assert "| fig9 | claim of fig9 | 1 / 2 | reproduced | full |" in text and "partly: x" not in text
    assert verdict_counts(page)["parrot"] == {"reproduced": 2, "partly": 0, "not reproduced": 0}
    assert verdict_counts(page)["sjfbco"]["not reproduced"] == 1


@pytest.mark.parametrize("paper, workload, field, value", [("asrpt", "google", "workload.kind", "google"),
                                                            ("gadget", "google", "workload.arrivals", "google"),
                                                            ("gadget", "philly", "workload.arrivals", "philly")])
def test_workload_choice_changes_every_sweep_figure(paper, workload, field, value):
    from raytestbed.experiments.papers import figures, workloads

    assert workload in workloads(paper) and workloads(paper)[0] != workload
    default = {f.id: f for f in figures(paper)}
    for f in figures(paper, workload):
        if f.sweep is None:
            continue
        sweep = f.sweep(True)
        assert sweep.name != default[f.id].sweep(True).name  # its own sweep folder name
        for cell in sweep.cells():  # every cell's trial validated
            node = cell.data
            for k in field.split("."):
                node = node[k]
            assert node == value


@pytest.mark.parametrize("workload, kind, span", [(None, "aaic", "all"), ("google", "google", "all"),
                                                  ("aaic-window", "aaic", "window"),
                                                  ("google-window", "google", "window")])
def test_asrpt_full_runs_fit_on_every_earlier_row_unless_a_window_is_named(workload, kind, span):
    """A full A-SRPT figure fits the predictors on every trace row before the set (the paper's setting);
    ``--workload aaic-window`` / ``google-window`` on the 20,000 rows before it; ``--quick`` on 300."""
    from raytestbed.experiments.papers import figures

    for f in figures("asrpt", workload):
        if f.sweep is None:
            continue
        for quick, want in ((False, span), (True, "window")):
            wl = f.sweep(quick).cells()[0].data["workload"]
            assert (wl.get("kind", "aaic"), wl["history_span"]) == (kind, want), (f.id, quick)
            assert wl["history_jobs"] == (300 if quick else 20_000)


def test_bad_workload_choice_is_a_one_line_error(tmp_path, capsys):
    assert main(["reproduce", "gadget", "--workload", "borg", "--quick", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--workload borg" in err and "poisson, google, philly, aaic" in err
    assert main(["reproduce", "parrot", "--workload", "google", "--out", str(tmp_path / "r")]) == 2
    assert "parrot has no workload choice" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def write_google_data(root):
    """A hand-made Google 2011 file (700 jobs, 23 logical names, one run time per name) and an AAIC GPU mix."""
    import gzip

    (root / "google-2011-jobs").mkdir(parents=True)
    with gzip.open(root / "google-2011-jobs" / "google2011_job_arrivals.csv.gz", "wt") as f:
        f.write("submit_s,job_id,scheduling_class,user_idx,logical_job_name_idx,run_s,end_event\n")
        f.writelines(f"{600 + 7 * i},{i},{i % 3},{i % 5},{i % 23},{30 + (i % 23) * 11},FINISH\n" for i in range(700))
    (root / "aaic-gpu-workload").mkdir()
    with gzip.open(root / "aaic-gpu-workload" / "aaicwl-201807-201812.csv.gz", "wt") as f:
        f.write("id, user, group, queue, nodes, gpus, walltime_req, termcode, time_submit, time_start, time_end, "
                "waittime, walltime\n")
        f.writelines(f"{i}, 0, 0, 0, 1, {g}, 3600, 0, {1_500_000_000 + i}, 0, 0, 0, 60\n"
                     for i, g in enumerate([1, 1, 2, 4, 8, 4096]))


def test_asrpt_jobs_figure_on_the_google_workload(tmp_path, monkeypatch):
    """--workload google: job sets from the Google file (GPUs drawn per logical name, groups = names), and the
    predictors' holdout errors on the later 20 % of history + set of every point."""
    import dataclasses

    from raytestbed.experiments.papers import figures
    from raytestbed.experiments.runner import run_sweep
    from raytestbed.traces.datadir import ENV_VAR

    write_google_data(tmp_path / "data")
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "data"))
    fig = {f.id: f for f in figures("asrpt", "google")}["jobs"]
    sweep = fig.sweep(True)
    sweep = dataclasses.replace(sweep, policies=[p for p in sweep.policies if p.label == "asrpt-perfect"])
    folder = tmp_path / "jobs"
    res = run_sweep(sweep, folder, executor="serial", show_progress=False)
    assert not res.failed
    df = res.table
    assert sorted(df["jobs"].unique()) == [150, 300] and (df["finished"] == df["jobs"]).all()
    jobs = pd.read_csv(folder / "cells" / df["cell"].iloc[0] / "jobs.csv")
    assert jobs["group"].str.match(r"n\d+$").all() and set(jobs["gpus"]) <= {1, 2, 4, 8}
    text = "\n".join(fig.ours(df, folder))
    assert "later 20% of history + set" in text
    ho = pd.read_csv(folder / "predictor_holdout.csv")
    assert set(ho["predictor"]) == {"rf", "rf-features", "median", "mean", "last20"}
    assert set(ho["x"]) == {150, 300} and set(ho["test_jobs"]) == {90, 120}  # 20 % of 300 history + n jobs
    # every logical name recurs with one run time: its median is exact on the held-out jobs
    assert (ho[ho["predictor"] == "median"]["mae_iterations"] == 0).all()


def _tiny_figure(tmp_path, workload: str):
    """A one-claim figure whose sweep is 2 cells of a 4-job trial (``workload``: the trial's workload line)."""
    from raytestbed.config import load_trial
    from raytestbed.experiments.papers.figure import Claim, Figure
    from raytestbed.experiments.spec import Sweep

    t = tmp_path / "tiny.yaml"
    t.write_text(f"name: tiny\ncluster: laptop.yaml\n{workload}\n")
    return Figure("sjfbco", "fig7", "tiny", "a claim", sweep=lambda quick: Sweep("tiny", [load_trial(t)], seeds=[1, 2]),
                  ours=lambda table, folder: [f"Ours: {len(table)} cells"],
                  claims=(Claim("FIFO finishes every job", lambda table, folder: ("4 jobs", "reproduced")),))


def test_quick_run_is_a_smoke_test_without_verdict_and_never_writes_the_results_page(tmp_path, capsys,
                                                                                    monkeypatch):
    import raytestbed.experiments.reproduce as rp

    fig = _tiny_figure(tmp_path, "workload: {kind: synthetic, jobs: 4, iterations: [20, 50]}")
    monkeypatch.setattr(rp, "select", lambda paper, figs, workload=None: [fig])
    out = tmp_path / "r"
    assert main(["reproduce", "sjfbco", "--quick", "--serial", "--quiet", "--out", str(out)]) == 0
    cap = capsys.readouterr()
    assert "smoke test of the pipeline, no verdict" in cap.out
    claims = pd.read_csv(out / "claims.csv")
    assert list(claims.columns) == ["figure", "claim", "ours"] and claims["ours"].tolist() == ["4 jobs"]
    text = (out / "reproduction.md").read_text()
    assert "no verdict" in text and "verdict |" not in text and "reproduced" not in text
    # --quick never writes a results page
    page = tmp_path / "results.md"
    page.write_text("keep\n")
    for flags in (["--results-md", str(page)], ["--write-docs"]):
        assert main(["reproduce", "sjfbco", "--quick", "--serial", "--quiet", "--out", str(out), *flags]) == 2
        assert "smoke test" in capsys.readouterr().err
    assert page.read_text() == "keep\n"
    # a full run writes its verdict, into the page it is given
    assert main(["reproduce", "sjfbco", "--serial", "--quiet", "--out", str(tmp_path / "full"),
                 "--results-md", str(page)]) == 0
    assert "| fig7 | FIFO finishes every job | 4 jobs | reproduced | full |" in page.read_text()


def test_failed_cells_exit_1_with_one_line_per_cause_and_leave_the_page_alone(tmp_path, capsys, monkeypatch):
    import raytestbed.experiments.reproduce as rp

    fig = _tiny_figure(tmp_path, "workload: {kind: csv, path: missing.csv}")
    monkeypatch.setattr(rp, "select", lambda paper, figs, workload=None: [fig])
    page = tmp_path / "results.md"
    page.write_text("keep\n")
    out = tmp_path / "r"
    assert main(["reproduce", "sjfbco", "--serial", "--quiet", "--out", str(out), "--results-md", str(page)]) == 1
    err = capsys.readouterr().err
    causes = [x for x in err.splitlines() if "cells failed" in x]
    assert len(causes) == 1 and causes[0].startswith("raytestbed: 2 cells failed: ") and "missing.csv" in causes[0]
    assert f"{page} left as it was: 2 cell(s) failed" in err
    assert page.read_text() == "keep\n"
    verdict = pd.read_csv(out / "claims.csv")["verdict"].tolist()
    assert verdict == ["not evaluated: 2 of 2 cells failed"]


def test_a_cell_one_figure_finished_is_reused_by_the_next(tmp_path):
    """Figures of one reproduction share cells (SJF-BCO's Fig. 5 at kappa = 1 is a point of Fig. 7): the later
    figure copies the finished cell from the folder instead of running it; with --force every cell runs."""
    import json

    from raytestbed.traces.datadir import find_data_dir

    if find_data_dir() is None:
        pytest.skip("shared/data not available")
    out = tmp_path / "r"
    reproduce("sjfbco", "fig5,fig7", True, out, executor="serial", show_progress=False)
    metas = [json.loads(p.read_text()) for p in (out / "fig7" / "cells").rglob("cell.json")]
    reused = [m for m in metas if "reused_from" in m]
    assert len(reused) == 1 and "/fig5/cells/" in reused[0]["reused_from"]
    src = out / reused[0]["reused_from"].split(str(out) + "/")[1]
    dest = out / "fig7" / "cells" / reused[0]["cell"]
    assert (src / "jobs.csv").read_bytes() == (dest / "jobs.csv").read_bytes()
    reproduce("sjfbco", "fig7", True, out, executor="serial", show_progress=False, force=True)
    assert not [p for p in (out / "fig7" / "cells").rglob("cell.json") if "reused_from" in json.loads(p.read_text())]
