"""What the commands print: plain progress lines off a terminal, no markup, no Ray start-up notes a user cannot
act on, and hints in the words of the entry point."""

import re
from pathlib import Path

import pytest

from raytestbed.cli import main

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "workloads" / "trials" / "demo.yaml"


def test_compare_prints_one_plain_progress_line_per_policy_off_a_terminal(tmp_path, capsys):
    t = tmp_path / "t.yaml"
    t.write_text("cluster: laptop.yaml\nworkload: {kind: synthetic, jobs: 5, iterations: [20, 50]}\n")
    assert main(["compare", str(t), "--policies", "fifo,asrpt", "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert re.fullmatch(r"fifo \(sim\): 5 of 5 jobs finished, [0-9.e+]+ s simulated, \d+ s wall", lines[0])
    assert lines[1].startswith("asrpt (sim): 5 of 5 jobs finished")
    assert "\x1b[" not in err and "\r" not in err  # no bar, no colour codes


def test_sweep_prints_a_plain_line_per_cell_off_a_terminal(tmp_path, capsys):
    sweep = tmp_path / "s.yaml"
    (tmp_path / "t.yaml").write_text("name: t\ncluster: laptop.yaml\nworkload: {kind: synthetic, jobs: 3}\n")
    sweep.write_text("name: s\ntrials: [t.yaml]\npolicies: [fifo]\nseeds: [1, 2]\n")
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "o"), "--serial"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^s: cell 1/2 t/base/fifo/seed-1: done \(", out, re.M), out
    assert re.search(r"^s: cell 2/2 t/base/fifo/seed-2: done \(", out, re.M), out


def test_listings_print_plain_text_not_markup(capsys):
    assert main(["workloads"]) == 0
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    assert "``" not in out and ":class:" not in out and "module doc" not in out
    assert "Synthetic recurring-group workload (seeded)." in out


def test_python_api_hint_says_force_true_and_the_cli_says_force(tmp_path, capsys):
    import raytestbed as rtb
    from raytestbed.results.writer import FolderExistsError

    out = tmp_path / "r"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    with pytest.raises(FolderExistsError, match=r"use force=True to replace it") as ei:
        rtb.run(DEMO, "fifo", out=out)
    assert "--force" not in str(ei.value)
    assert main(["run", str(DEMO), "--out", str(out), "--quiet"]) == 2
    assert "use --force to replace it" in capsys.readouterr().err
    assert (out / "keep.txt").exists()


def test_ray_driver_messages_are_plain_and_the_start_up_concurrency_note_is_left_out(capsys, monkeypatch):
    worker = pytest.importorskip("ray._private.worker")
    from raytestbed.emu import raysession

    seen = []
    monkeypatch.setattr(worker, "print_to_stdstream", lambda data, ignore_prefix=False: seen.append(data))
    raysession.plain_driver_messages()
    printer = worker.print_to_stdstream
    assert getattr(printer, "_raytestbed_plain", False)
    printer({"lines": ["\x1b[33mWARNING: 8 PYTHON worker processes have been started on node: abc with address: "
                       "127.0.0.1, which is 4x the maximum expected startup concurrency (2). This could ..."],
             "pid": "raylet", "is_err": False}, ignore_prefix=False)
    printer({"lines": ["A worker died or was killed while executing a task by an unexpected system error."],
             "pid": "raylet", "is_err": False}, ignore_prefix=False)
    cap = capsys.readouterr()
    assert cap.out == "" and seen == []
    assert cap.err == "ray (raylet): A worker died or was killed while executing a task by an unexpected system error.\n"


def test_a_listing_read_only_in_part_ends_quietly():
    """`raytestbed policies | true`: the reader closes the pipe before the listing is written (closed at once,
    while the command is still starting, so the whole listing cannot slip into the pipe's buffer first
    on a slow host); no BrokenPipeError traceback, exit status 141 as a shell reports for SIGPIPE."""
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "from raytestbed.cli import main; import sys; sys.exit(main(['policies']))"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    p.stdout.close()  # like `true`: the reader is gone before the first line
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141 and "Traceback" not in err and "BrokenPipe" not in err, err
