"""``raytestbed data``: the catalogue, the data folder, ``fetch`` from a mirror (folder, file:// and
http:// URLs), refusals (checksum mismatch, truncated file) that leave nothing half-written, ``verify``
and the missing-data error that names the data set and the command that gets it."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import io
import threading
from pathlib import Path

import pytest

from raytestbed.cli import main
from raytestbed.data import catalogue as cat
from raytestbed.data.catalogue import DataFile, Dataset
from raytestbed.data.fetch import fetch, verify
from raytestbed.data.store import ENV_VAR, data_dirs, data_file, user_data_dir
from raytestbed.errors import DataError, TraceError

FILES = {"a.csv": b"x,y\n1,2\n3,4\n", "sub/b.txt": b"hello data\n" * 50}


def _fake(urls: bool = True) -> Dataset:
    return Dataset(name="tiny-set", title="a tiny data set", origin="https://example.org/tiny", licence="CC0",
                   used_by="tests", files=tuple(
                       DataFile(path=p, url=f"https://example.org/tiny/{p}" if urls else None, size=len(b),
                                sha256=hashlib.sha256(b).hexdigest()) for p, b in FILES.items()))


@pytest.fixture
def mirror(tmp_path) -> Path:
    """A copy of a data folder holding the tiny data set."""
    root = tmp_path / "mirror"
    for p, b in FILES.items():
        (root / "tiny-set" / p).parent.mkdir(parents=True, exist_ok=True)
        (root / "tiny-set" / p).write_bytes(b)
    return root


@pytest.fixture
def fake_catalogue(monkeypatch):
    ds = _fake()
    monkeypatch.setattr(cat, "catalogue", lambda: {ds.name: ds})
    return ds


def _leftovers(folder: Path) -> list[Path]:
    """Temporary files a fetch might have left behind."""
    return [p for p in folder.rglob("*") if p.is_file() and (p.name.startswith(".") or "partial" in p.name)]


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("as_url", [False, True], ids=["folder", "file-url"])
def test_fetch_from_a_local_mirror(mirror, tmp_path, as_url):
    ds, dest = _fake(), tmp_path / "data"
    rep = fetch(ds, dest, mirror.as_uri() if as_url else mirror)
    assert rep.fetched == list(FILES) and rep.kept == []
    for p, b in FILES.items():
        assert (dest / "tiny-set" / p).read_bytes() == b
    assert _leftovers(dest) == []
    assert verify(ds, dest) == {p: "ok" for p in FILES}
    again = fetch(ds, dest, mirror)  # present and correct: kept, nothing downloaded
    assert again.fetched == [] and again.kept == list(FILES)


def test_fetch_from_an_http_mirror(mirror, tmp_path):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(mirror))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        fetch(_fake(), tmp_path / "data", url)
        with pytest.raises(DataError, match="cannot read"):  # a file the mirror does not have: 404
            fetch(_fake(), tmp_path / "data2", url + "nothing-here/")
    finally:
        server.shutdown()
        server.server_close()
    assert (tmp_path / "data" / "tiny-set" / "sub" / "b.txt").read_bytes() == FILES["sub/b.txt"]
    assert not (tmp_path / "data2").exists()  # not even the folders it would have made


def test_checksum_mismatch_is_refused_and_nothing_is_left(mirror, tmp_path):
    bad = bytearray(FILES["a.csv"])
    bad[0] ^= 1  # same size, other bytes
    (mirror / "tiny-set" / "a.csv").write_bytes(bytes(bad))
    dest = tmp_path / "data"
    with pytest.raises(DataError, match="sha256") as e:
        fetch(_fake(), dest, mirror)
    assert "tiny-set/a.csv" in str(e.value) and "\n" not in str(e.value)
    assert not (dest / "tiny-set" / "a.csv").exists() and _leftovers(dest) == []
    assert not dest.exists()  # the folders it made for the file are gone too


def test_truncated_file_is_refused_and_nothing_is_left(mirror, tmp_path):
    (mirror / "tiny-set" / "sub" / "b.txt").write_bytes(FILES["sub/b.txt"][:100])
    dest = tmp_path / "data"
    with pytest.raises(DataError, match="truncated"):
        fetch(_fake(), dest, mirror)
    assert (dest / "tiny-set" / "a.csv").read_bytes() == FILES["a.csv"]  # the file before it: whole and checked
    assert not (dest / "tiny-set" / "sub" / "b.txt").exists() and _leftovers(dest) == []


def test_a_bad_download_never_replaces_a_good_file(mirror, tmp_path):
    dest = tmp_path / "data"
    fetch(_fake(), dest, mirror)
    (mirror / "tiny-set" / "a.csv").write_bytes(b"x,y\n")
    with pytest.raises(DataError):
        fetch(_fake(), dest, mirror, force=True)
    assert (dest / "tiny-set" / "a.csv").read_bytes() == FILES["a.csv"] and _leftovers(dest) == []


def test_no_public_download_asks_for_a_mirror(tmp_path):
    with pytest.raises(DataError, match="--from DIR"):
        fetch(_fake(urls=False), tmp_path / "data")
    assert _leftovers(tmp_path / "data") == []


def test_cli_fetch_verify_list(fake_catalogue, mirror, tmp_path, monkeypatch):
    data = tmp_path / "data"
    monkeypatch.setenv(ENV_VAR, str(data))
    code, out, _ = _cli("data", "list")
    assert code == 0 and "tiny-set" in out and "CC0" in out and "https://example.org/tiny" in out
    assert out.split("tiny-set", 1)[1].splitlines()[0].split()[-1] == "no"
    code, out, err = _cli("data", "fetch", "tiny-set", "--from", str(mirror), "--quiet")
    assert code == 0, err
    assert "2 file(s) fetched" in out and (data / "tiny-set" / "a.csv").is_file()
    code, out, _ = _cli("data", "list")
    assert f"yes ({data})" in out
    assert _cli("data", "verify")[0] == 0
    (data / "tiny-set" / "a.csv").write_bytes(b"X" * len(FILES["a.csv"]))  # corrupted in place
    code, out, _ = _cli("data", "verify", "tiny-set")
    assert code == 1 and "a.csv: wrong sha256" in out and "raytestbed data fetch tiny-set --force" in out
    (mirror / "tiny-set" / "a.csv").write_bytes(b"x,y\n")
    code, _, err = _cli("data", "fetch", "tiny-set", "--from", str(mirror), "--force", "--quiet")
    assert code == 2 and "truncated" in err and len(err.strip().splitlines()) == 1
    code, _, err = _cli("data", "fetch", "no-such-set")
    assert code == 2 and "unknown data set 'no-such-set'" in err and "tiny-set" in err


def test_missing_data_names_the_data_set_and_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "empty"))
    with pytest.raises(TraceError) as e:
        data_file("philly-jobs-rfold/philly_trace.csv")
    msg = str(e.value)
    assert "data set philly-jobs-rfold not found" in msg and msg.endswith("raytestbed data fetch philly-jobs-rfold")
    assert ENV_VAR in msg and "\n" not in msg


def test_data_folders_in_order(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert user_data_dir() == tmp_path / "xdg" / "raytestbed" / "data"
    dev = tmp_path / "checkout" / "shared" / "data"
    (dev / "philly-jobs-rfold").mkdir(parents=True)
    (dev / "philly-jobs-rfold" / "philly_trace.csv").write_text("dev copy")
    start = tmp_path / "checkout" / "trials"
    start.mkdir()
    assert data_dirs([start])[:2] == [user_data_dir(), dev]
    assert data_file("philly-jobs-rfold/philly_trace.csv", [start]) == dev / "philly-jobs-rfold" / "philly_trace.csv"
    user = user_data_dir() / "philly-jobs-rfold"
    user.mkdir(parents=True)
    (user / "philly_trace.csv").write_text("fetched copy")  # the per-user folder comes first
    assert data_file("philly-jobs-rfold/philly_trace.csv", [start]) == user / "philly_trace.csv"
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "site"))  # the variable is the only folder
    assert data_dirs([start]) == [tmp_path / "site"]


def test_the_catalogue_covers_every_file_the_loaders_read():
    from raytestbed.traces import aaic, arrival_patterns, dirlab, google, parrot_workloads, philly, sjfbco_workload

    rels = {philly.FILE, google.FILE, *google.GPU_SOURCES.values(), str(sjfbco_workload.PHILLY_FILE),
            "/".join(parrot_workloads.MS60_FILE), "/".join(parrot_workloads.FB_FILE),
            *(t.file for t in arrival_patterns.ARRIVAL_TRACES.values()),
            *(f"{aaic.FOLDER}/{f}" for f in aaic.DEFAULT_FILES),
            *(f"{dirlab.FOLDER}/{t}_data_training.csv" for t in ("helios", "philly"))}
    known = {f"{ds.name}/{f.path}" for ds in cat.catalogue().values() for f in ds.files}
    assert rels <= known, rels - known
    for ds in cat.catalogue().values():
        assert ds.origin and ds.licence and ds.files
        for f in ds.files:
            assert f.url is None or f.url.startswith("https://raw.githubusercontent.com/"), f.url


def test_the_recorded_checksums_match_the_data_folder(tmp_path, monkeypatch):
    """Fetch every data set from the data folder as a mirror (skipped where there is none)."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    here = [d for d in data_dirs() if all((d / ds.name).is_dir() for ds in cat.catalogue().values())]
    if not here:
        pytest.skip("no data folder with every data set")
    code, out, err = _cli("data", "fetch", "--all", "--from", str(here[0]), "--dir", str(tmp_path / "d"), "--quiet")
    assert code == 0, err
    n = sum(len(ds.files) for ds in cat.catalogue().values())
    assert sum(1 for p in (tmp_path / "d").rglob("*") if p.is_file()) == n and _leftovers(tmp_path / "d") == []
