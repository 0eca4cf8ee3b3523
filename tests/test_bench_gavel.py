"""`raytestbed bench gavel`: our side on a tiny Gavel-format trace (hand-computed), Gavel's side read
from a stand-in driver that prints what Gavel's driver prints, and one-line errors."""

import json
import sys

import pytest

from raytestbed.cli import main as cli_main
from benchmarks.gavel import main

#: two 1-GPU jobs of 720 steps arriving at 0 s, a third of 360 steps at 100 s (Gavel's ten fields)
TRACE = "".join(f"{m}\tpython3 x.py\tdir\t--steps\t1\t{steps}\t1\t1\t-1.000000\t{t}\n"
                for m, steps, t in (("A", 720, 0), ("A", 720, 0), ("A", 360, 100)))


@pytest.fixture
def files(tmp_path):
    (tmp_path / "jobs.trace").write_text(TRACE)
    (tmp_path / "table.json").write_text(json.dumps({"v100": {"('A', 1)": {"null": 2.0}},
                                                     "p100": {"('A', 1)": {"null": 1.0}}}))
    return tmp_path


def row(out: str, policy: str) -> list[str]:
    line = next(x for x in out.splitlines() if x.startswith("| jobs.trace | " + policy + " |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_our_side_runs_without_gavel(files, capsys):
    """One V100 (2 steps/s) and one P100 (1 step/s), fifo_perf: at 0 s job 0 takes the V100 and job 1 the
    P100; job 2 waits. Job 0 ends at 360 s, a round boundary; the allocation waits for the reset interval
    (1,920 s), so job 1 stays on the P100 (done at 720 s) and job 2 is outside the allocation until the
    first round at or after 1,920 s (2,160 s), then runs 360 steps on the V100: done at 2,340 s.
    JCTs 360, 720, 2,240 s: average 1,106.67 s = 0.307 h."""
    assert main(["--trace", str(files / "jobs.trace"), "--cluster", "1:1:0", "--policies", "fifo_perf",
                 "--throughputs", str(files / "table.json")]) == 0
    cells = row(capsys.readouterr().out, "fifo_perf")
    assert cells[2] == "3" and cells[3] == f"{(360 + 720 + 2240) / 3 / 3600:.3f}"
    assert cells[6:] == ["-"] * 7  # no Gavel columns without --gavel


def test_gavel_side_is_read_from_its_driver_output(files, capsys):
    """A stand-in for Gavel's driver prints per-job JCTs as Gavel's does (one job dropped, so only the two
    both finished count) and the window keeps jobs 0 and 1."""
    drv = files / "gavel" / "scheduler" / "scripts" / "drivers"
    drv.mkdir(parents=True)
    (drv / "simulate_scheduler_with_trace.py").write_text(
        "import sys\nsys.stderr.write('[Job failed]\\tJob ID: 1\\n')\n"
        "print('Job completion times:')\nprint('Job 0: 720.000')\nprint('Job 2: 100.000')\n"
        "print('Average job completion time: 410.000 seconds (0.11 hours)')\n")
    assert main(["--trace", str(files / "jobs.trace"), "--cluster", "1:1:0", "--policies", "fifo_perf",
                 "--throughputs", str(files / "table.json"), "--window", "0:2", "--gavel", str(files / "gavel"),
                 "--gavel-python", sys.executable, "--out", str(files / "out")]) == 0
    cells = row(capsys.readouterr().out, "fifo_perf")
    # job 0 only: ours 360 s, Gavel's 720 s; Gavel dropped one job
    assert cells[2] == "1" and cells[3] == f"{360 / 3600:.3f}" and cells[6] == f"{720 / 3600:.3f}"
    assert cells[7] == "1" and cells[10] == "0.500"
    csv = (files / "out" / "jct_jobs_fifo_perf.csv").read_text().splitlines()
    assert csv[0] == "job_id,ours_jct_s,gavel_jct_s" and csv[1] == "0,360.0,720.0" and csv[2] == "1,720.0,"


@pytest.mark.parametrize("args,says", [
    (["--policies", "fifo,las"], "--policies: unknown las"),
    (["--window", "2:9"], "--window 2:9 is outside the trace's 3 jobs"),
    (["--gavel", "nowhere"], "no scripts/drivers/simulate_scheduler_with_trace.py"),
])
def test_bad_input_is_one_line_exit_2(files, capsys, args, says):
    assert main(["--trace", str(files / "jobs.trace"), "--cluster", "1:1:0", "--throughputs",
                 str(files / "table.json"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1


def test_registered_as_a_bench(files, capsys):
    assert cli_main(["bench", "gavel", "--trace", str(files / "jobs.trace"), "--cluster", "1:1:0",
                     "--policies", "fifo_perf", "--throughputs", str(files / "table.json")]) == 0
    assert row(capsys.readouterr().out, "fifo_perf")[2] == "3"
