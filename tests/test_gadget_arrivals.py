"""Trace-shaped arrivals for the GADGET workload (gadget.md GD-12): ``arrivals: poisson|philly|aaic``."""

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from raytestbed.config import load_cluster
from raytestbed.errors import ConfigError, TraceError
from raytestbed.traces import arrival_patterns
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
    """The data folder as the loaders find it ($RAYTESTBED_DATA_DIR or shared/data), if it has both traces."""
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


def test_google_submit_times(tmp_path, monkeypatch, cluster):
    d = tmp_path / "google-2011-jobs"
    d.mkdir()
    rows = [(700.0, "5.0", "FINISH"), (600.5, "", ""), (640.5, "12.5", "KILL"), (900.5, "1.0", "FAIL")]
    with gzip.open(d / "google2011_job_arrivals.csv.gz", "wt") as f:
        f.write("submit_s,job_id,scheduling_class,user_idx,logical_job_name_idx,run_s,end_event\n")
        f.writelines(f"{t},{i},0,1,2,{r},{e}\n" for i, (t, r, e) in enumerate(rows))
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    # every submit counts (also the row without a run time), sorted; gaps 40 : 59.5 : 200.5 kept
    np.testing.assert_allclose(trace_shaped_arrivals("google", 4, 1200.0, 1),
                               np.array([0.0, 40.0, 99.5, 300.0]) / 300.0 * 900.0)
    jobs = gadget(cluster, jobs=4, arrivals="google")
    assert [j.arrival_s for j in jobs] == pytest.approx([0.0, 40.0 * 30, 99.5 * 30, 300.0 * 30])  # last at 12000 s x 3/4
    with gzip.open(d / "google2011_job_arrivals.csv.gz", "at") as f:
        f.write("soon,9,0,1,2,1.0,FINISH\n")
    arrival_patterns._cached_times.cache_clear()  # the cache is keyed by mtime; do not rely on its resolution
    with pytest.raises(TraceError, match=r"google2011_job_arrivals\.csv\.gz line 6: column 'submit_s': 'soon'"):
        gadget(cluster, jobs=2, arrivals="google")


def test_bad_arrivals_value_is_refused(cluster):
    with pytest.raises(ConfigError, match=r"workload: arrivals: .*unknown arrival pattern 'borg'.*poisson, philly, aaic, google"):
        gadget(cluster, arrivals="borg")


# ---- the real traces in shared/data (skipped when absent)

@pytest.mark.parametrize("trace", [pytest.param(t, marks=pytest.mark.slow) if t == "google" else t
                                   for t in ARRIVAL_TRACES])  # google: 668k rows, ~10 s to read
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


def test_real_trace_tests_follow_the_loaders_data_folder(tmp_path, monkeypatch):
    # $RAYTESTBED_DATA_DIR (the documented override) must not switch the real-trace tests off
    d = find_data_dir([Path(__file__).parent])
    if d is None:
        pytest.skip("no data folder: nothing to point $RAYTESTBED_DATA_DIR at")
    monkeypatch.setenv(ENV_VAR, str(d))
    assert (real_traces() == d) == all((d / t.file).is_file() for t in ARRIVAL_TRACES.values())
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "absent"))
    assert real_traces() is None
