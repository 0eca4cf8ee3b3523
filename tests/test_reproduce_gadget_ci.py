"""GADGET's reproduction: five seeds in a full run, Fig. 4's verdict over the CI and under every reading."""

import pandas as pd

from raytestbed.experiments.papers import gadget


def _fig4(ratios: dict) -> pd.DataFrame:
    """``ratios``: policy -> {jobs: [utility over seeds]}; the baselines get 100 (LAS), 90, 80."""
    rows = []
    for policy, per_count in ratios.items():
        for n, us in per_count.items():
            rows += [{"workload.jobs": n, "seed": s, "policy": policy, "total_utility": u}
                     for s, u in enumerate(us, start=1)]
    for n in next(iter(ratios.values())):
        for s in range(1, len(next(iter(next(iter(ratios.values())).values()))) + 1):
            rows += [{"workload.jobs": n, "seed": s, "policy": b, "total_utility": u}
                     for b, u in (("las", 100.0), ("drf", 90.0), ("fifo-ring", 80.0))]
    return pd.DataFrame(rows)


def test_full_runs_have_five_seeds_and_quick_one():
    for fig in gadget.figures():
        if fig.sweep is not None:
            assert fig.sweep(False).seeds == [1, 2, 3, 4, 5] and fig.sweep(True).seeds == [1], fig.id


def test_fig4_verdict_per_reading_over_the_ci():
    df = _fig4({"gadget": {500: [105, 106, 105], 4000: [110, 112, 111]},        # above, growing: reproduced
                "gadget-float": {500: [99, 101, 100], 4000: [100, 99, 101]},   # ties the best baseline
                "gadget-env": {500: [90, 92, 91], 4000: [95, 94, 96]}})        # below LAS on every seed
    ours, verdict = gadget._fig4_check(df, None)
    assert verdict.startswith("reproduced (over the 95 % CI of the seeds) [other readings: gadget-float: not "
                              "reproduced: not above the best baseline over the 95 % CI at every job count; "
                              "gadget-env: not reproduced: the best baseline above over the 95 % CI at 500, 4000 jobs]")
    assert "gadget / best baseline: 500 jobs 1.053 ± " in ours
    steady = _fig4({"gadget": {500: [110, 111, 109], 4000: [110, 109, 111]}})  # above, the gap not growing
    assert gadget._fig4_check(steady, None)[1] == ("partly: above the best baseline over the CI, the gap not "
                                                   "growing over the CI")
    one = _fig4({"gadget": {500: [110], 4000: [120]}})
    assert gadget._fig4_check(one, None)[1] == "partly: one seed, no confidence interval"


def test_embedded_ratio_rises_over_the_ci():
    check = gadget._rises("node_units")
    rows = [{"node_units": k, "seed": s, "embedded_ratio": v}
            for k, vs in ((0.5, [0.60, 0.62, 0.61]), (4.0, [0.90, 0.91, 0.93])) for s, v in enumerate(vs, 1)]
    assert check(pd.DataFrame(rows), None)[1].startswith("reproduced")
    rows = [{"node_units": k, "seed": s, "embedded_ratio": v}
            for k, vs in ((0.5, [0.60, 0.90, 0.61]), (4.0, [0.70, 0.62, 0.72])) for s, v in enumerate(vs, 1)]
    assert check(pd.DataFrame(rows), None)[1] == "not reproduced: the ratio does not rise with capacity over the 95 % CI"


def test_fig4_runs_again_with_the_budget_read_literally():
    fig = next(f for f in gadget.figures() if f.id == "fig4-literal")
    sweep = fig.sweep(False)
    assert [p.label for p in sweep.policies] == ["gadget", "fifo-ring", "drf", "las"]
    assert {c.data["workload"]["budget_mode"] for c in sweep.cells()} == {"literal"}
    assert {c.data["workload"]["budget_mode"] for c in gadget.fig4_sweep(False).cells()} == {"iterations"}
    assert sweep.name != gadget.fig4_sweep(False).name  # its cells never mix with Fig. 4's
    df = _fig4({"gadget": {500: [105, 106, 105], 4000: [110, 112, 111]}})
    ours, verdict = fig.claims[0].check(df, None)
    assert verdict == "reproduced (over the 95 % CI of the seeds)" and ours.startswith("gadget / best baseline: 500 jobs")


def test_fig4_runs_again_with_lambda2_per_worker_slot():
    """The lambda2 reading: the same draws, lambda2 divided by each job's zeta; its own sweep and claim."""
    from pathlib import Path

    from raytestbed.config import parse_trial
    from raytestbed.traces.registry import load_workload

    fig = next(f for f in gadget.figures() if f.id == "fig4-lambda2-slot")
    sweep = fig.sweep(True)
    assert [p.label for p in sweep.policies] == ["gadget", "fifo-ring", "drf", "las"]
    assert sweep.name not in (gadget.fig4_sweep(True).name, gadget.fig4_sweep(True, budget="literal").name)
    assert all("lambda2_unit" not in c.data["workload"] for c in gadget.fig4_sweep(True).cells())

    def jobs(cell):
        lt = parse_trial(cell.data, "cell", Path(cell.path))
        cl = lt.cluster_config.build()
        wl = dict(lt.trial.workload)
        return load_workload(wl.pop("kind"), wl, cl, 1, lt.base_dir, lt.profiles)

    per_iter, per_slot = jobs(gadget.fig4_sweep(True).cells()[0]), jobs(sweep.cells()[0])
    assert len(per_iter) == len(per_slot) > 0
    for a, b in zip(per_iter, per_slot):
        assert b.extra["lambda2"] == a.extra["lambda2"] / a.extra["zeta"]
        assert {k: v for k, v in a.extra.items() if k not in ("lambda2", "lambda2_unit")} == \
            {k: v for k, v in b.extra.items() if k not in ("lambda2", "lambda2_unit")}
        assert (a.arrival_s, a.iterations) == (b.arrival_s, b.iterations)
    assert {j.extra["lambda2_unit"] for j in per_slot} == {"worker_slot"}
