"""A-SRPT Table II (Heavy-Edge vs the placement ILP, `raytestbed bench placement`), reduced sizes."""

from raytestbed.config import CLUSTER_CONFIG_DIR
from raytestbed.experiments.papers import asrpt_table2 as placement_bench


def _script(name):
    return placement_bench


def test_bench_placement_table2_small():
    bench = _script("bench_placement")
    name, rows = bench.table2(["gpt-tiny"], 3, 6, 0, CLUSTER_CONFIG_DIR / "asrpt_sim_250x8.yaml")
    assert name == "heavy_edge"
    (r,) = rows
    assert r["cases"] == 3 and r["ilp_pitt_ms"] > 0
    assert r["mapper_pitt_ms"] >= r["ilp_pitt_ms"] * (1 - 1e-9)  # the ILP never loses
    assert "gap %" in bench.format_table2(name, rows)


def test_random_caps_are_valid():
    import numpy as np
    bench = _script("bench_placement")
    rng = np.random.default_rng(0)
    for gpus in (2, 5, 16, 30):
        for _ in range(20):
            caps = bench.random_caps(rng, gpus, 8)
            assert sum(caps) == gpus and len(caps) >= 2 and max(caps) <= 8 and min(caps) >= 1
