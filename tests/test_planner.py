"""Pipeline planner: PipeDream-style DP against exhaustive search of the same objective."""

import itertools
import math

import pytest

from raytestbed.core.profile import LayerProfile, ModelProfile, default_profiles
from raytestbed.placement.planner import plan_configs, planning_bandwidth
from raytestbed.traces.jobs import build_job


def _profile(costs, params, outs) -> ModelProfile:
    layers = [LayerProfile(f"l{i}", c / 3, 2 * c / 3, o, p) for i, (c, p, o) in enumerate(zip(costs, params, outs))]
    return ModelProfile("toy", 1, "test", "none", layers)


def _objective(prof: ModelProfile, bounds, reps, bw):
    sp = prof.stage_profiles(list(bounds))
    worst = 0.0
    for st, m in zip(sp, reps):
        ar = 2 * (m - 1) * st.param_bytes / (m * bw)
        worst = max(worst, max(st.compute_s, ar) / m)
        if st.out_bytes:
            worst = max(worst, 2 * st.out_bytes / bw)
    return worst


def _brute(prof, gpus, S, bw):
    n = prof.num_layers
    best = math.inf
    for cuts in itertools.combinations(range(1, n), S - 1):
        bounds = (0, *cuts)
        for reps in itertools.product(range(1, gpus + 1), repeat=S):
            if sum(reps) == gpus:
                best = min(best, _objective(prof, bounds, reps, bw))
    return best


@pytest.mark.parametrize("gpus", [1, 2, 3, 5])
def test_dp_matches_exhaustive_search(gpus):
    prof = _profile([0.05, 0.01, 0.08, 0.02, 0.03, 0.04],
                    [4e8, 1e6, 2e8, 0.0, 5e7, 3e7], [2e7, 1e7, 5e6, 3e7, 1e6, 0.0])
    bw = 1e9
    cfgs = plan_configs(prof, gpus, bw, max_stages=4)
    assert len({c.num_stages for c in cfgs}) == len(cfgs) == min(gpus, 4)
    assert [c.est_time_s for c in cfgs] == sorted(c.est_time_s for c in cfgs)
    for c in cfgs:
        assert c.gpus == gpus and c.boundaries[0] == 0
        assert c.est_time_s == pytest.approx(_objective(prof, c.boundaries, c.replicas, bw), rel=1e-12)
        assert c.est_time_s == pytest.approx(_brute(prof, gpus, c.num_stages, bw), rel=1e-12)


def test_shipped_profiles_give_valid_jobs():
    profs = default_profiles()
    for model in ("vgg16", "gnmt", "inception_v3"):
        for g in (1, 4, 16):
            cfgs = plan_configs(profs[model], g, planning_bandwidth(g, 8, 1.25e9, 3e11))
            assert cfgs and cfgs[0].gpus == g
            job = build_job(0, 0.0, profs[model], g, "pipeline", 10, boundaries=cfgs[-1].boundaries,
                            replicas=cfgs[-1].replicas)
            assert job.replicas() == cfgs[-1].replicas
            assert sum(st.profile.compute_s for st in job.stages) == pytest.approx(profs[model].total_compute_s)


def test_build_job_config_validation():
    prof = default_profiles()["gnmt"]
    with pytest.raises(ValueError, match="add up"):
        build_job(0, 0.0, prof, 4, "pipeline", 1, boundaries=(0, 10), replicas=(2, 1))
    with pytest.raises(ValueError, match="together"):
        build_job(0, 0.0, prof, 3, "pipeline", 1, replicas=(2, 1))
