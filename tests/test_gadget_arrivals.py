"""Trace-shaped arrivals for the GADGET workload (gadget.md GD-12): ``arrivals: poisson|philly|aaic``."""

import os
from pathlib import Path

import numpy as np
import pytest

from raytestbed.config import load_cluster
from raytestbed.errors import ConfigError, TraceError
from raytestbed.traces.arrival_patterns import ARRIVAL_TRACES, trace_shaped_arrivals
from raytestbed.traces.datadir import ENV_VAR, find_data_dir
from raytestbed.traces.registry import load_workload

ROOT = Path(__file__).resolve().parent.parent
SLOT = 60.0
PHILLY_HEADER = "#job id,arrival time (sec),topology,shape,size,duration (sec)\n"


@pytest.fixture(scope="module")
def cluster():
    return load_cluster(ROOT / "cluster_configs" / "gadget_fattree_50.yaml").build()


def gadget(cluster, seed=1, **kw):
    params = dict(jobs=300, slots=200, slot_s=SLOT)
    params.update(kw)
    return load_workload("gadget", params, cluster, seed, ROOT)


def arrivals(jobs):
    return np.array([j.arrival_s for j in jobs])


def real_traces():
    if os.environ.get(ENV_VAR):
        return None
    d = find_data_dir([Path(__file__).parent])
    if d is None or not all((d / t.file).is_file() for t in ARRIVAL_TRACES.values()):
        return None
    return d


def write_philly(root: Path, arrivals_s) -> None:
    d = root / "philly-jobs-rfold"
    d.mkdir(parents=True, exist_ok=True)
    rows = "".join(f"{i},{a},CLOS,1,1,100.0\n" for i, a in enumerate(arrivals_s))
    (d / "philly_trace.csv").write_text(PHILLY_HEADER + rows)


# ---- mapping, on small hand-made traces

def test_linear_map_onto_the_poisson_window(tmp_path, monkeypatch):
    # 3 rows and 3 jobs: the only start row is 0; the gaps 10 s and 20 s keep their 1:2 ratio
    write_philly(tmp_path, [100, 110, 130])
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    a = trace_shaped_arrivals("philly", 3, span=1200.0, seed=7)
    np.testing.assert_allclose(a, [0.0, 800.0 / 3, 800.0])  # last at span * (n-1)/n


def test_unsorted_trace_rows_are_sorted(tmp_path, monkeypatch):
    write_philly(tmp_path, [130, 100, 110])
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    np.testing.assert_allclose(trace_shaped_arrivals("philly", 3, 1200.0, 1), [0.0, 800.0 / 3, 800.0])


def test_bad_cell_names_file_and_line(tmp_path, monkeypatch, cluster):
    write_philly(tmp_path, [0, 5, "soon", 9])
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(TraceError, match=r"philly_trace\.csv line 4: column 'arrival time \(sec\)': 'soon'"):
        gadget(cluster, jobs=2, arrivals="philly")


def test_too_few_rows_and_a_single_instant_are_refused(tmp_path, monkeypatch):
    write_philly(tmp_path, [5, 5, 5])
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(TraceError, match=r"philly_trace\.csv: 3 submit times, 4 jobs"):
        trace_shaped_arrivals("philly", 4, 1200.0, 1)
    with pytest.raises(TraceError, match=r"philly_trace\.csv: the 3 jobs .* all submitted at 5 s"):
        trace_shaped_arrivals("philly", 3, 1200.0, 1)


def test_bad_arrivals_value_is_refused(cluster):
    with pytest.raises(ConfigError, match=r"workload: arrivals: .*unknown arrival pattern 'google'.*poisson, philly"):
        gadget(cluster, arrivals="google")


# ---- the real traces in shared/data (skipped when absent)

@pytest.mark.parametrize("trace", list(ARRIVAL_TRACES))
@pytest.mark.parametrize("n, arrival_slots", [(500, None), (4000, None), (400, 50)])
def test_real_trace_arrivals(cluster, trace, n, arrival_slots):
    if real_traces() is None:
        pytest.skip("shared/data not available")
    kw = {} if arrival_slots is None else dict(arrival_slots=arrival_slots)
    pois = gadget(cluster, seed=3, jobs=n, **kw)
    shaped = gadget(cluster, seed=3, jobs=n, arrivals=trace, **kw)
    window = (arrival_slots or 200) * SLOT
    a = arrivals(shaped)
    # same job count, same window, monotone arrivals
    assert len(shaped) == len(pois) == n
    assert a[0] == 0.0 and np.all(np.diff(a) >= 0)
    assert a[-1] == pytest.approx(window * (n - 1) / n, abs=1e-6) and a[-1] < window
    # only the arrival times differ: every job parameter is the Poisson run's
    for p, s in zip(pois, shaped):
        assert (p.job_id, p.iterations, p.max_workers, p.stages, p.extra) == (s.job_id, s.iterations, s.max_workers,
                                                                              s.stages, s.extra)
    ap = arrivals(pois)
    assert np.mean(np.abs(a - ap)) > 0.01 * window
    # bursty: the trace pattern has simultaneous submissions; a Poisson process has none
    assert np.any(np.diff(a) == 0) and not np.any(np.diff(ap) == 0)
    # deterministic under the seed; another seed takes another stretch of the trace
    np.testing.assert_array_equal(a, arrivals(gadget(cluster, seed=3, jobs=n, arrivals=trace, **kw)))
    assert not np.array_equal(a, arrivals(gadget(cluster, seed=4, jobs=n, arrivals=trace, **kw)))
