"""Property-based checks of the bad-input contract over every workload loader and the trial schema.

For every loader (csv, synthetic, aaic, philly, dirlab, sjfbco, gadget with Poisson and
trace-shaped arrivals, ms60, ms60_poisson, fb_coflow) and for the trial/cluster schema,
hypothesis generates

* malformed inputs — one cell or field of an otherwise valid input replaced by NaN, infinity,
  a negative or too large number, zero where a count is needed, a fraction where an integer is
  needed, text that is not a number, or nothing: ``raytestbed run`` (called in-process through
  :func:`raytestbed.cli.main`) must exit 2 with one line that names the row and column (or the
  field), and leave no results folder;
* valid inputs — the run must succeed and write one ``jobs.csv`` row per job.

Any other exception escapes ``main`` and fails the test with its traceback. Examples are small
and few (``max_examples``) so the file runs in the default ``make test``; the generation is
derandomized, so a run is reproducible.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from raytestbed.cli import main
from raytestbed.traces.csvrows import MAX_SECONDS
from raytestbed.traces.datadir import ENV_VAR


def _settings(n: int) -> settings:
    # no shrinking: a failure is reported at once with the example that failed (shrinking can take
    # minutes here, each step a CLI run); re-enable Phase.shrink locally to minimise an example
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    phases=(Phase.explicit, Phase.generate),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


BAD = _settings(12)  #: malformed inputs are refused before anything runs: cheap
GOOD = _settings(2)  #: a valid input runs the simulator and writes the report: ~0.3 s each

# ---------------------------------------------------------------- values


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


NON_FINITE = st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999"])
NOT_A_NUMBER = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=6).filter(
    lambda s: not _is_number(s))
NEGATIVE = st.floats(-1e12, -1e-6).map(repr)
ZERO = st.sampled_from(["0", "0.0", "-0"])
FRACTION = st.floats(0.01, 1e6).filter(lambda v: v != int(v)).map(repr)
HUGE_TIME = st.floats(MAX_SECONDS * 1.001, 1e300).map(repr)
HUGE_INT = st.floats(1e16, 1e300).map(repr)
EMPTY = st.just("")

#: a time cell (seconds, >= 0): every way to get it wrong
BAD_TIME = st.one_of(NON_FINITE, NEGATIVE, HUGE_TIME, NOT_A_NUMBER, EMPTY)
#: a count cell (integer >= 1)
BAD_COUNT = st.one_of(NON_FINITE, NEGATIVE, ZERO, FRACTION, HUGE_INT, NOT_A_NUMBER, EMPTY)
#: an integer cell (>= 0)
BAD_INT = st.one_of(NON_FINITE, NEGATIVE, FRACTION, HUGE_INT, NOT_A_NUMBER, EMPTY)

#: optional parameters: ``None`` (null) is valid for them
OPTIONAL = {"limit", "offered_load", "jobs@philly", "arrival_slots", "servers.0.nic_gbps"}


def _required(field: str, strategy: st.SearchStrategy) -> st.SearchStrategy:
    """``strategy`` without ``None`` when ``field`` is optional (null means its default there)."""
    return strategy.filter(lambda v: v is not None) if field in OPTIONAL else strategy


#: a YAML parameter that must be a positive number
BAD_POSITIVE = st.one_of(st.sampled_from([float("nan"), float("inf"), float("-inf"), 0, -1, -0.5, "x", None]),
                         st.floats(-1e9, -1e-9))
#: a YAML parameter that must be a positive integer
BAD_POSITIVE_INT = st.one_of(BAD_POSITIVE, st.sampled_from([1.5, "3x", [1]]))
#: a YAML parameter that must be a non-negative number
BAD_NON_NEGATIVE = st.sampled_from([float("nan"), float("inf"), -1, -1e-3, "x", None])

# ---------------------------------------------------------------- running the CLI


def _write_csv(path: Path, header: list[str], rows: list[list], gz: bool = False) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8", newline="") as f:
            f.write(buf.getvalue())
    else:
        path.write_text(buf.getvalue(), encoding="utf-8")


@contextlib.contextmanager
def _folder(env: bool = False):
    """A fresh folder; with ``env``, ``$RAYTESTBED_DATA_DIR`` points at its ``data/`` for the duration."""
    d = Path(tempfile.mkdtemp(prefix="rtb-prop-"))
    old = os.environ.get(ENV_VAR)
    if env:
        (d / "data").mkdir()
        os.environ[ENV_VAR] = str(d / "data")
    try:
        yield d
    finally:
        if env:
            if old is None:
                os.environ.pop(ENV_VAR, None)
            else:
                os.environ[ENV_VAR] = old
        shutil.rmtree(d, ignore_errors=True)


def _run(d: Path, trial: dict) -> tuple[int, str]:
    (d / "t.yaml").write_text(yaml.safe_dump(trial, sort_keys=False), encoding="utf-8")
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(["run", str(d / "t.yaml"), "--out", str(d / "out"), "--quiet"])
    return code, err.getvalue()


def _refused(d: Path, trial: dict, *needles: str) -> str:
    code, err = _run(d, trial)
    assert code == 2, err
    assert err.startswith("raytestbed: error: ") and err.count("\n") == 1, err
    for n in needles:
        assert n in err, (n, err)
    assert not (d / "out").exists() and not list(d.glob("out.*")), list(d.iterdir())
    return err


def _ran(d: Path, trial: dict, jobs: int | None = None) -> pd.DataFrame:
    code, err = _run(d, trial)
    assert code == 0, err
    df = pd.read_csv(d / "out" / "jobs.csv")
    assert jobs is None or len(df) == jobs
    assert (df["status"] == "finished").all()
    return df


def _trial(workload: dict, cluster="laptop.yaml", **extra) -> dict:
    return {"cluster": cluster, "workload": workload, **extra}


def _spoil(draw, rows: list[list], columns: dict[int, st.SearchStrategy]) -> tuple[int, int]:
    """Replace one cell (a random row, one of ``columns``) by a bad value; return (row index, column index)."""
    r = draw(st.integers(0, len(rows) - 1))
    c = draw(st.sampled_from(sorted(columns)))
    rows[r][c] = draw(columns[c])
    return r, c


# ---------------------------------------------------------------- csv

CSV_HEADER = ["job_id", "arrival_s", "gpus", "model", "iterations", "comm"]
MODELS = st.sampled_from(["vgg16", "resnet50", "gnmt"])


@st.composite
def csv_rows(draw, n_max=4):
    n = draw(st.integers(1, n_max))
    return [[i, draw(st.floats(0, 1e5)), draw(st.integers(1, 4)), draw(MODELS), draw(st.integers(1, 200)),
             draw(st.sampled_from(["pipeline", "rar", "ps", ""]))] for i in range(n)]


@BAD
@given(st.data())
def test_csv_malformed_cell(data):
    rows = data.draw(csv_rows())
    r, c = _spoil(data.draw, rows, {0: BAD_INT, 1: BAD_TIME, 2: BAD_COUNT, 4: BAD_COUNT})
    if CSV_HEADER[c] == "iterations" and rows[r][c] == "":  # optional column: the row then has neither
        says = "needs 'iterations' or 'duration_s'"
    else:
        says = f"column '{CSV_HEADER[c]}': " + (repr(str(rows[r][c])) if rows[r][c] != "" else "missing value")
    with _folder() as d:
        _write_csv(d / "jobs.csv", CSV_HEADER, rows)
        _refused(d, _trial({"kind": "csv", "path": "jobs.csv"}), f"jobs.csv line {r + 2}: {says}")


@BAD
@given(rows=csv_rows(), dur=BAD_TIME)
def test_csv_malformed_duration(rows, dur):
    table = [[*row[:4], float(row[4]), row[5]] for row in rows]
    table[-1][4] = dur
    with _folder() as d:
        _write_csv(d / "jobs.csv", CSV_HEADER[:4] + ["duration_s", "comm"], table)
        msg = f"column 'duration_s'" if dur else "needs 'iterations' or 'duration_s'"
        _refused(d, _trial({"kind": "csv", "path": "jobs.csv"}), f"jobs.csv line {len(table) + 1}: ", msg)


@BAD
@given(rows=csv_rows(), field=st.sampled_from(["arrival_scale", "iteration_scale", "limit"]), data=st.data())
def test_csv_malformed_parameter(rows, field, data):
    value = data.draw(_required(field, BAD_POSITIVE))
    with _folder() as d:
        _write_csv(d / "jobs.csv", CSV_HEADER, rows)
        _refused(d, _trial({"kind": "csv", "path": "jobs.csv", field: value}), f"workload: {field}: ")


@GOOD
@given(rows=csv_rows(), durations=st.booleans())
def test_csv_valid(rows, durations):
    header = list(CSV_HEADER)
    if durations:  # duration_s instead of iterations: n = duration / alpha~min
        header[4] = "duration_s"
        rows = [[*row[:4], float(row[4]) * 0.7, row[5]] for row in rows]
    with _folder() as d:
        _write_csv(d / "jobs.csv", header, rows)
        _ran(d, _trial({"kind": "csv", "path": "jobs.csv"}), len(rows))


# ---------------------------------------------------------------- synthetic

SYNTH_BAD = {
    "jobs": BAD_POSITIVE_INT, "mean_interarrival_s": BAD_POSITIVE, "groups": BAD_POSITIVE_INT,
    "users": BAD_POSITIVE_INT, "zipf_s": BAD_NON_NEGATIVE, "iteration_spread": BAD_NON_NEGATIVE,
    "iterations": st.sampled_from([[0, 5], [5, 1], [float("nan"), 3], [1, float("inf")], [-1, 2], [1]]),
    "gpu_mix": st.sampled_from([{0: 1.0}, {1: -1.0}, {1: float("nan")}, {1: float("inf")}, {}, {1: 0.0}]),
    "models": st.sampled_from([[], ["no-such-model"]]),
}


@BAD
@given(field=st.sampled_from(sorted(SYNTH_BAD)), data=st.data())
def test_synthetic_malformed_parameter(field, data):
    with _folder() as d:
        _refused(d, _trial({"kind": "synthetic", "jobs": 3, field: data.draw(SYNTH_BAD[field])}), field)


@GOOD
@given(jobs=st.integers(1, 6), gap=st.floats(0.1, 1e4), lo=st.integers(1, 100), span=st.integers(0, 300),
       zipf=st.floats(0, 3), spread=st.floats(0, 1))
def test_synthetic_valid(jobs, gap, lo, span, zipf, spread):
    wl = {"kind": "synthetic", "jobs": jobs, "mean_interarrival_s": gap, "iterations": [lo, lo + span],
          "zipf_s": zipf, "iteration_spread": spread}
    with _folder() as d:
        _ran(d, _trial(wl), jobs)


# ---------------------------------------------------------------- A-SRPT traces: aaic, philly, dirlab

AAIC_HEADER = ["id", "user", "group", "queue", "nodes", "gpus", "walltime_req", "termcode", "time_submit",
               "time_start", "time_end", "waittime", "walltime"]


@st.composite
def aaic_rows(draw):
    n = draw(st.integers(2, 5))
    t0 = draw(st.integers(1_400_000_000, 1_600_000_000))
    return [[i, draw(st.integers(0, 3)), 0, draw(st.integers(0, 1)), draw(st.integers(1, 2)), draw(st.integers(1, 4)),
             3600, 0, t0 + draw(st.integers(0, 10_000)), 0, 0, 0, draw(st.floats(0, 5000))] for i in range(n)]


AAIC_BAD = {1: BAD_INT, 2: BAD_INT, 3: BAD_INT, 4: BAD_INT, 5: BAD_INT, 6: BAD_INT, 7: BAD_INT,
            8: st.one_of(BAD_INT, HUGE_TIME), 12: BAD_TIME}


@BAD
@given(st.data())
def test_aaic_malformed_cell(data):
    rows = data.draw(aaic_rows())
    r, c = _spoil(data.draw, rows, AAIC_BAD)
    with _folder() as d:
        _write_csv(d / "a.csv.gz", AAIC_HEADER, rows, gz=True)
        _refused(d, _trial({"kind": "aaic", "path": "a.csv.gz"}), f"a.csv.gz line {r + 2}: column '{AAIC_HEADER[c]}'")


@GOOD
@given(rows=aaic_rows())
def test_aaic_valid(rows):
    with _folder() as d:
        _write_csv(d / "a.csv.gz", AAIC_HEADER, rows, gz=True)
        _ran(d, _trial({"kind": "aaic", "path": "a.csv.gz"}), len(rows))


PHILLY_HEADER = ["#job id", "arrival time (sec)", "topology", "shape", "size", "duration (sec)"]


@st.composite
def philly_rows(draw, n_min=2, n_max=5):
    n = draw(st.integers(n_min, n_max))
    t = sorted(draw(st.lists(st.floats(0, 1e6), min_size=n, max_size=n, unique=True)))
    return [[i, t[i], "CLOS", "1", draw(st.integers(1, 8)), draw(st.floats(0, 1e4))] for i in range(n)]


@BAD
@given(st.data())
def test_philly_malformed_cell(data):
    rows = data.draw(philly_rows())
    r, c = _spoil(data.draw, rows, {1: BAD_TIME, 4: BAD_COUNT, 5: BAD_TIME})
    with _folder() as d:
        _write_csv(d / "p.csv", PHILLY_HEADER, rows)
        _refused(d, _trial({"kind": "philly", "path": "p.csv"}), f"p.csv line {r + 2}: column '{PHILLY_HEADER[c]}'")


@BAD
@given(rows=philly_rows(), data=st.data(), field=st.sampled_from(["arrival_scale", "iteration_scale", "offered_load",
                                                                  "jobs", "configs_per_model", "max_stages"]))
def test_philly_malformed_parameter(rows, data, field):
    value = data.draw(_required(f"{field}@philly" if field == "jobs" else field, BAD_POSITIVE_INT if field in (
        "jobs", "configs_per_model", "max_stages") else BAD_POSITIVE))
    with _folder() as d:
        _write_csv(d / "p.csv", PHILLY_HEADER, rows)
        _refused(d, _trial({"kind": "philly", "path": "p.csv", field: value}), f"workload: {field}: ")


@GOOD
@given(rows=philly_rows(), scale=st.floats(0.01, 10))
def test_philly_valid(rows, scale):
    with _folder() as d:
        _write_csv(d / "p.csv", PHILLY_HEADER, rows)
        _ran(d, _trial({"kind": "philly", "path": "p.csv", "arrival_scale": scale, "iteration_scale": 0.1}),
             len(rows))


DIRLAB_HEADER = ["u_id", "user", "gpu_num", "cpu_num", "node_num", "interval", "run_time", "wall_time", "new_status"]


@st.composite
def dirlab_rows(draw):
    n = draw(st.integers(2, 5))
    return [[i, draw(st.integers(0, 3)), draw(st.integers(1, 8)), 1, 1, draw(st.floats(0, 1000)),
             draw(st.floats(0, 5000)), 0, "Pass"] for i in range(n)]


@BAD
@given(st.data())
def test_dirlab_malformed_cell(data):
    rows = data.draw(dirlab_rows())
    r, c = _spoil(data.draw, rows, {1: BAD_INT, 2: BAD_INT, 3: BAD_INT, 4: BAD_INT, 5: BAD_TIME, 6: BAD_TIME})
    with _folder() as d:
        _write_csv(d / "h.csv", DIRLAB_HEADER, rows)
        _refused(d, _trial({"kind": "dirlab", "path": "h.csv"}), f"h.csv line {r + 2}: column '{DIRLAB_HEADER[c]}'")


@GOOD
@given(rows=dirlab_rows())
def test_dirlab_valid(rows):
    with _folder() as d:
        _write_csv(d / "h.csv", DIRLAB_HEADER, rows)
        _ran(d, _trial({"kind": "dirlab", "path": "h.csv"}), len(rows))


# ---------------------------------------------------------------- sjfbco

SJFBCO_BAD = {
    "mix": st.sampled_from([{0: 1}, {2: -1}, {}, {2: 0}, {2: 1.5}, {2: float("nan")}]),
    "rho_range": st.sampled_from([[float("nan"), 5], [300, 50], [0, 10], [-1, 10], [1, float("inf")]]),
    "tau_range": st.sampled_from([[float("nan"), 0.05], [0.05, 0.01], [-0.01, 0.05], [0.01, float("inf")]]),
    "iterations_range": st.sampled_from([[0, 10], [10, 5], [-3, 10], [1.5, 10]]),
    "arrival_scale": BAD_POSITIVE, "comm_fraction": BAD_NON_NEGATIVE,
}


@BAD
@given(field=st.sampled_from(sorted(SJFBCO_BAD)), data=st.data())
def test_sjfbco_malformed_parameter(field, data):
    wl = {"kind": "sjfbco", "mix": {1: 2, 2: 1}, "durations": "uniform", field: data.draw(SJFBCO_BAD[field])}
    with _folder() as d:
        _refused(d, _trial(wl), field)


@BAD
@given(st.data())
def test_sjfbco_malformed_philly_cell(data):
    rows = data.draw(philly_rows(n_min=6, n_max=8))
    r, c = _spoil(data.draw, rows, {1: BAD_TIME, 4: BAD_COUNT, 5: BAD_TIME})
    with _folder() as d:
        (d / "data" / "philly-jobs-rfold").mkdir(parents=True)
        _write_csv(d / "data" / "philly-jobs-rfold" / "philly_trace.csv", PHILLY_HEADER, rows)
        wl = {"kind": "sjfbco", "mix": {1: 2}, "durations": "uniform", "arrivals": "philly", "data_dir": "data"}
        _refused(d, _trial(wl), f"philly_trace.csv line {r + 2}: column '{PHILLY_HEADER[c]}'")


@GOOD
@given(mix=st.dictionaries(st.sampled_from([1, 2, 4, 8]), st.integers(1, 2), min_size=1, max_size=3),
       comm=st.floats(0, 0.1))
def test_sjfbco_valid(mix, comm):
    wl = {"kind": "sjfbco", "mix": mix, "durations": "uniform", "comm_fraction": comm}
    with _folder() as d:
        _ran(d, _trial(wl), sum(mix.values()))


# ---------------------------------------------------------------- gadget (Poisson and trace-shaped arrivals)

GADGET_BAD = {
    "jobs": BAD_POSITIVE_INT, "slots": BAD_POSITIVE_INT, "slot_s": BAD_POSITIVE, "arrival_slots": BAD_POSITIVE,
    "arrivals": st.sampled_from(["gogle", "", "PHILLY"]), "budget_mode": st.sampled_from(["x", ""]),
    "max_workers": st.sampled_from([[0, 5], [5, 1], [1, float("inf")]]),
    "zeta": st.sampled_from([[0, 5], [500, 50], [float("nan"), 5]]),
    "bandwidth_mbps": st.sampled_from([[-100, 5000], [100, 1.5]]),
    "lambda2": st.sampled_from([[-0.1, 1.0], [0.0, 1.5], [float("nan"), 1.0], [0.5, 0.2]]),
}


@BAD
@given(field=st.sampled_from(sorted(GADGET_BAD)), data=st.data())
def test_gadget_malformed_parameter(field, data):
    with _folder() as d:
        _refused(d, _trial({"kind": "gadget", "jobs": 3, field: data.draw(_required(field, GADGET_BAD[field]))}), field)


@BAD
@given(st.data())
def test_gadget_trace_arrivals_malformed_cell(data):
    rows = data.draw(philly_rows(n_min=4, n_max=6))
    r, c = _spoil(data.draw, rows, {1: BAD_TIME, 4: BAD_COUNT, 5: BAD_TIME})
    with _folder(env=True) as d:
        (d / "data" / "philly-jobs-rfold").mkdir()
        _write_csv(d / "data" / "philly-jobs-rfold" / "philly_trace.csv", PHILLY_HEADER, rows)
        _refused(d, _trial({"kind": "gadget", "jobs": 3, "arrivals": "philly"}),
                 f"philly_trace.csv line {r + 2}: column '{PHILLY_HEADER[c]}'")


@BAD
@given(st.data())
def test_gadget_aaic_arrivals_malformed_cell(data):
    rows = data.draw(aaic_rows())
    r, c = _spoil(data.draw, rows, AAIC_BAD)
    with _folder(env=True) as d:
        (d / "data" / "aaic-gpu-workload").mkdir()
        _write_csv(d / "data" / "aaic-gpu-workload" / "aaicwl-201807-201812.csv.gz", AAIC_HEADER, rows, gz=True)
        _refused(d, _trial({"kind": "gadget", "jobs": 2, "arrivals": "aaic"}),
                 f"line {r + 2}: column '{AAIC_HEADER[c]}'")


@GOOD
@given(jobs=st.integers(1, 4), slots=st.integers(1, 20), slot_s=st.floats(1, 120), arrivals=st.sampled_from(
    ["poisson", "philly"]), rows=philly_rows(n_min=4, n_max=6))
def test_gadget_valid(jobs, slots, slot_s, arrivals, rows):
    wl = {"kind": "gadget", "jobs": jobs, "slots": slots, "slot_s": slot_s, "arrivals": arrivals}
    with _folder(env=True) as d:
        (d / "data" / "philly-jobs-rfold").mkdir()
        _write_csv(d / "data" / "philly-jobs-rfold" / "philly_trace.csv", PHILLY_HEADER, rows)
        _ran(d, _trial(wl, timing={"model": "gadget"}), jobs)


# ---------------------------------------------------------------- Parrot: ms60, ms60_poisson, fb_coflow

PARROT_CLUSTER = {"nic_gbps": 10, "intra_gbytes_per_s": 300, "servers": [{"count": 8, "gpus": 2}]}
MS60_HEADER = ["job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration"]


@st.composite
def ms60_rows(draw):
    n = draw(st.integers(1, 4))
    return [[i, draw(st.integers(1, 2)), draw(st.floats(0, 1000)), draw(st.integers(1, 20)), "vgg19",
             draw(st.floats(1, 500))] for i in range(n)]


@BAD
@given(st.data(), st.sampled_from(["ms60", "ms60_poisson"]))
def test_ms60_malformed_cell(data, kind):
    rows = data.draw(ms60_rows())
    r, c = _spoil(data.draw, rows, {0: BAD_INT, 1: BAD_COUNT, 2: BAD_TIME, 3: BAD_COUNT,
                                    5: st.one_of(BAD_TIME, ZERO)})
    with _folder() as d:
        _write_csv(d / "m.csv", MS60_HEADER, rows)
        _refused(d, _trial({"kind": kind, "path": "m.csv"}, PARROT_CLUSTER, timing={"mode": "flow"}),
                 f"m.csv line {r + 2}: column '{MS60_HEADER[c]}'")


@BAD
@given(rows=ms60_rows(), data=st.data(), field=st.sampled_from(["gpu_scale", "iteration_scale", "max_coflow_mb",
                                                                "mb_bytes", "mean_gap_s", "jobs"]))
def test_ms60_malformed_parameter(rows, data, field):
    value = data.draw(BAD_POSITIVE_INT if field in ("gpu_scale", "jobs") else BAD_POSITIVE)
    with _folder() as d:
        _write_csv(d / "m.csv", MS60_HEADER, rows)
        _refused(d, _trial({"kind": "ms60_poisson", "path": "m.csv", field: value}, PARROT_CLUSTER,
                           timing={"mode": "flow"}), f"workload: {field}: ")


@GOOD
@given(rows=ms60_rows(), kind=st.sampled_from(["ms60", "ms60_poisson"]))
def test_ms60_valid(rows, kind):
    wl = {"kind": kind, "path": "m.csv", "gpu_scale": 1, "max_coflow_mb": 1.0, "arrival_scale": 0.01}
    if kind == "ms60_poisson":
        wl["jobs"] = 3
    with _folder() as d:
        _write_csv(d / "m.csv", MS60_HEADER, rows)
        _ran(d, _trial(wl, PARROT_CLUSTER, timing={"mode": "flow"}), len(rows) if kind == "ms60" else 3)


@st.composite
def fb_lines(draw):
    n = draw(st.integers(1, 4))
    lines = []
    for i in range(n):
        maps = draw(st.lists(st.integers(0, 7), min_size=1, max_size=3))
        reds = draw(st.lists(st.tuples(st.integers(0, 7), st.floats(0.01, 50)), min_size=1, max_size=3))
        lines.append([str(i + 1), repr(draw(st.floats(0, 1e5))), str(len(maps)), *map(str, maps), str(len(reds)),
                      *(f"{p}:{mb!r}" for p, mb in reds)])
    return lines


def _fb_text(lines) -> str:
    return "8 %d\n" % len(lines) + "".join(" ".join(tok) + "\n" for tok in lines)


@BAD
@given(st.data())
def test_fb_coflow_malformed_field(data):
    lines = data.draw(fb_lines())
    r = data.draw(st.integers(0, len(lines) - 1))
    tok = lines[r]
    n_map = int(tok[2])
    where = data.draw(st.sampled_from(["arrival ms", "mappers", "mapper", "reducer MB"]))
    if where == "arrival ms":
        tok[1] = data.draw(st.one_of(NON_FINITE, NEGATIVE, st.floats(MAX_SECONDS * 1001, 1e300).map(repr)))
    elif where == "mappers":
        tok[2] = data.draw(st.one_of(NON_FINITE, NEGATIVE, ZERO, FRACTION))
    elif where == "mapper":
        tok[3] = data.draw(st.one_of(NON_FINITE, NEGATIVE, FRACTION))
    else:
        i = 4 + n_map  # the first reducer
        port = tok[i].split(":")[0]
        tok[i] = f"{port}:{data.draw(st.one_of(NON_FINITE, NEGATIVE, st.text('x,;', min_size=1, max_size=3)))}"
    with _folder() as d:
        (d / "fb.txt").write_text(_fb_text(lines), encoding="utf-8")
        _refused(d, _trial({"kind": "fb_coflow", "path": "fb.txt"}, PARROT_CLUSTER, timing={"mode": "flow"}),
                 f"fb.txt line {r + 2}: column '{where}'")


@GOOD
@given(lines=fb_lines())
def test_fb_coflow_valid(lines):
    with _folder() as d:
        (d / "fb.txt").write_text(_fb_text(lines), encoding="utf-8")
        _ran(d, _trial({"kind": "fb_coflow", "path": "fb.txt"}, PARROT_CLUSTER, timing={"mode": "flow"}),
             len(lines))


# ---------------------------------------------------------------- the trial and cluster schema

#: (path in the trial, bad values): every numeric field of the cluster, timing, emu and trial sections
TRIAL_BAD = {
    ("cluster", "nic_gbps"): BAD_POSITIVE,
    ("cluster", "intra_gbytes_per_s"): BAD_POSITIVE,
    ("cluster", "servers", 0, "count"): BAD_POSITIVE_INT,
    ("cluster", "servers", 0, "gpus"): BAD_POSITIVE_INT,
    ("cluster", "servers", 0, "nic_gbps"): BAD_POSITIVE,
    ("cluster", "servers", 0, "memory_gb"): BAD_NON_NEGATIVE,
    ("cluster", "racks", 0, "uplink_gbps"): BAD_POSITIVE,
    ("cluster", "racks", 0, "downlink_gbps"): BAD_POSITIVE.filter(lambda v: v is not None),
    ("cluster", "servers_per_rack"): BAD_POSITIVE_INT.filter(lambda v: v is not None),
    ("timing", "iterations_per_coflow"): BAD_POSITIVE_INT,
    ("timing", "model_params", "xi1"): st.sampled_from([float("nan"), "x", None]),
    ("emu", "pace"): BAD_POSITIVE.filter(lambda v: v is not None),
    ("emu", "compute_factor"): BAD_POSITIVE.filter(lambda v: v is not None),
    ("emu", "progress_s"): BAD_POSITIVE,
    ("emu", "start_timeout_s"): BAD_POSITIVE.filter(lambda v: v is not None),
    ("seed",): st.sampled_from([-1, 1.5, float("nan"), float("inf"), "x", 2 ** 63, None]),
    ("policy",): st.sampled_from(["nosuch", "", "fifo+nosuch", 3]),
    ("backend",): st.sampled_from(["gpu", "", None]),
    ("faults",): st.sampled_from([["kill_server:99@5s"], ["kill_server:1@-5s"], ["x"], ["kill_server:1@nans"]]),
}


def _base_trial() -> dict:
    return {"seed": 3, "cluster": {"nic_gbps": 10, "intra_gbytes_per_s": 300,
                                   "servers": [{"count": 2, "gpus": 4, "nic_gbps": 10, "memory_gb": 8}],
                                   "racks": [{"uplink_gbps": 40, "downlink_gbps": 40}], "servers_per_rack": 2},
            "workload": {"kind": "synthetic", "jobs": 3, "gpu_mix": {1: 1.0}},
            "timing": {"iterations_per_coflow": 1, "model_params": {}}, "emu": {"pace": 10, "compute_factor": 1.0, "progress_s": 1}}


@BAD
@given(path=st.sampled_from(sorted(TRIAL_BAD, key=str)), data=st.data())
def test_trial_malformed_field(path, data):
    trial = _base_trial()
    node = trial
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = data.draw(_required(".".join(map(str, path[1:])), TRIAL_BAD[path]))
    with _folder() as d:
        err = _refused(d, trial)
        assert "t.yaml" in err or path[0] in ("policy", "faults"), err
        assert str(path[-1]) in err or path[0] in ("policy", "faults"), err


@GOOD
@given(nic=st.floats(0.1, 400), intra=st.floats(1, 900), count=st.integers(1, 4), gpus=st.integers(1, 8),
       seed=st.integers(0, 2 ** 63 - 1), uplink=st.floats(1, 400))
def test_trial_valid(nic, intra, count, gpus, seed, uplink):
    trial = _base_trial()
    trial.update(seed=seed)
    trial["cluster"].update(nic_gbps=nic, intra_gbytes_per_s=intra, servers=[{"count": count, "gpus": gpus}],
                            racks=[{"uplink_gbps": uplink}], servers_per_rack=count)
    with _folder() as d:
        _ran(d, trial, 3)


# ---------------------------------------------------------------- anything at all: exit 0 or one line and 2

#: values of any YAML type except large positive numbers (those are valid and could ask for a huge run)
JUNK = st.one_of(st.none(), st.booleans(), st.text(max_size=8), NON_FINITE.map(float), st.floats(-1e300, 1e-3),
                 st.integers(-2 ** 70, 0), st.lists(st.integers(-3, 3), max_size=3),
                 st.dictionaries(st.text(max_size=3), st.integers(-3, 3), max_size=2))
LOADER_FIELDS = [("synthetic", f) for f in ("jobs", "mean_interarrival_s", "iterations", "gpu_mix", "comm_mix",
                                            "models", "groups", "zipf_s")] + \
    [("gadget", f) for f in ("jobs", "slots", "slot_s", "arrival_slots", "zeta", "lambda2", "budget_mode")] + \
    [("sjfbco", f) for f in ("mix", "rho_range", "tau_range", "iterations_range", "comm_fraction", "arrivals")]


def _no_traceback(d: Path, trial: dict) -> None:
    code, err = _run(d, trial)
    assert code in (0, 2), err
    if code == 2:
        assert err.startswith("raytestbed: error: ") and err.count("\n") == 1, err
        assert not (d / "out").exists() and not list(d.glob("out.*"))


@BAD
@given(where=st.sampled_from(LOADER_FIELDS), value=JUNK)
def test_any_loader_parameter_value(where, value):
    kind, field = where
    wl = {"kind": kind, "jobs": 2} if kind != "sjfbco" else {"kind": kind, "mix": {1: 2}, "durations": "uniform"}
    wl[field] = value
    with _folder() as d:
        _no_traceback(d, _trial(wl, timing={"model": "gadget"} if kind == "gadget" else {}))


@BAD
@given(rows=csv_rows(n_max=3), data=st.data())
def test_any_csv_cell(rows, data):
    r = data.draw(st.integers(0, len(rows) - 1))
    c = data.draw(st.integers(0, len(CSV_HEADER) - 1))
    rows[r][c] = data.draw(st.one_of(st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=8),
                                     st.floats(allow_nan=True, allow_infinity=True).map(repr)))
    with _folder() as d:
        _write_csv(d / "jobs.csv", CSV_HEADER, rows)
        _no_traceback(d, _trial({"kind": "csv", "path": "jobs.csv"}))


@BAD
@given(path=st.sampled_from(sorted(TRIAL_BAD, key=str)), value=JUNK)
def test_any_trial_field_value(path, value):
    trial = _base_trial()
    node = trial
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with _folder() as d:
        _no_traceback(d, trial)


def _policy_fields() -> list[tuple[str, str]]:
    import inspect

    from raytestbed.schedulers.base import available_policies

    out = []
    for name, cls in sorted(available_policies().items()):
        for p in inspect.signature(cls.__init__).parameters:
            if p not in ("self", "seed", "history", "args", "kwargs"):
                out.append((name, p))
    return out


#: JUNK without positive numbers (a tiny positive interval could ask for millions of ticks)
NON_POSITIVE_JUNK = st.one_of(st.none(), st.booleans(), st.text(max_size=8), NON_FINITE.map(float),
                              st.floats(-1e300, 0), st.integers(-2 ** 70, 0), st.lists(st.integers(-3, 3), max_size=3))


@BAD
@given(where=st.sampled_from(_policy_fields()), value=NON_POSITIVE_JUNK)
def test_any_policy_parameter_value(where, value):
    policy, field = where
    with _folder() as d:
        trial = _trial({"kind": "synthetic", "jobs": 3, "comm_mix": {"rar": 1.0}}, policy_params={policy: {field: value}})
        from raytestbed.schedulers.base import available_policies

        if available_policies()[policy].role == "network":
            trial.update(policy="fifo", network_policy=policy, timing={"mode": "flow"})
        else:
            trial.update(policy=policy)
        _no_traceback(d, trial)
