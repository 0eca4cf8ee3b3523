"""``raytestbed data fetch`` and ``verify``: download a data set's files and check them against the catalogue.

A file is fetched from its URL in the catalogue, or from a mirror: ``source`` is a folder or a
``file://``, ``http://`` or ``https://`` URL laid out as a data folder (``SOURCE/NAME/PATH``).
Each file is written atomically: downloaded into a temporary file in its target folder, its size
and sha256 checked against the catalogue, then renamed into place. A truncated download or a
checksum mismatch is refused (:class:`~raytestbed.errors.DataError`) and its temporary file
removed, so a data folder only ever holds whole, checked files. Files already present with the
right checksum are kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from raytestbed.data.catalogue import DataFile, Dataset
from raytestbed.errors import DataError

CHUNK = 1 << 20  #: bytes read at a time
TIMEOUT_S = 60.0  #: seconds without data before a download is given up


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def file_state(folder: Path, ds: Dataset, f: DataFile, check: bool = True) -> str:
    """``"ok"``, ``"missing"``, ``"wrong size"`` or ``"wrong sha256"`` (``check=False``: size only)."""
    p = folder / ds.name / f.path
    if not p.is_file():
        return "missing"
    if p.stat().st_size != f.size:
        return "wrong size"
    if check and sha256_of(p) != f.sha256:
        return "wrong sha256"
    return "ok"


def source_url(ds: Dataset, f: DataFile, source: str | os.PathLike[str] | None) -> str:
    """Where ``f`` is fetched from: its origin URL, or ``SOURCE/NAME/PATH`` of a mirror (folder or URL)."""
    if source is None:
        if not f.url:
            raise DataError(f"{ds.name}/{f.path}: no public download; fetch it from a copy of the data folder: "
                            f"raytestbed data fetch {ds.name} --from DIR")
        return f.url
    s = str(source)
    if "://" in s:
        return f"{s.rstrip('/')}/{urllib.parse.quote(ds.name)}/{urllib.parse.quote(f.path)}"
    return (Path(s).expanduser().resolve() / ds.name / f.path).as_uri()


def _download(url: str, out, progress: Callable[[int], None] | None) -> None:
    """Copy ``url`` into the open binary file ``out``."""
    req = urllib.request.Request(url, headers={"User-Agent": "raytestbed-data-fetch"})
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:  # noqa: S310 - http(s) and file URLs by design
        for block in iter(lambda: r.read(CHUNK), b""):
            out.write(block)
            if progress is not None:
                progress(len(block))


def fetch_file(ds: Dataset, f: DataFile, dest: Path, source: str | os.PathLike[str] | None = None,
               progress: Callable[[int], None] | None = None) -> Path:
    """Download one file into ``dest/NAME/PATH``, checked, atomically; the path written.

    Raises:
        DataError: the source cannot be read, the file is truncated or its sha256 differs (nothing
            is left behind).
    """
    target = dest / ds.name / f.path
    url = source_url(ds, f, source)
    made = [d for d in [target.parent, *target.parent.parents] if not d.exists()]  # folders to remove on failure
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                _download(url, out, progress)
            except (urllib.error.URLError, OSError, ValueError) as e:
                reason = getattr(e, "reason", None) or getattr(e, "strerror", None) or e
                raise DataError(f"{ds.name}/{f.path}: cannot read {url}: {reason}") from None
        size = tmp.stat().st_size
        if size != f.size:
            raise DataError(f"{ds.name}/{f.path}: {url} gave {size:,} bytes, the catalogue says {f.size:,} "
                            f"({'truncated' if size < f.size else 'too long'}); refused")
        got = sha256_of(tmp)
        if got != f.sha256:
            raise DataError(f"{ds.name}/{f.path}: sha256 {got[:16]}… of {url} differs from the catalogue's "
                            f"{f.sha256[:16]}…; refused")
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 -> what the user's umask gives a new file
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        for d in made:  # innermost first; only the (now empty) folders this call made
            with contextlib.suppress(OSError):
                d.rmdir()
        raise
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@dataclass
class FetchReport:
    """What :func:`fetch` did: files downloaded, files already present and correct."""

    fetched: list[str]
    kept: list[str]


def fetch(ds: Dataset, dest: Path, source: str | os.PathLike[str] | None = None, force: bool = False,
          on_file: Callable[[DataFile, str], None] | None = None,
          progress: Callable[[int], None] | None = None) -> FetchReport:
    """Fetch every file of ``ds`` into ``dest/NAME/`` (kept when present and correct, unless ``force``).

    ``on_file(file, url)`` is called before each download, ``progress(bytes)`` as bytes arrive.
    A failure stops at that file (:class:`DataError`); the files fetched before it stay (each is whole and checked).
    """
    rep = FetchReport([], [])
    for f in ds.files:
        if not force and file_state(dest, ds, f) == "ok":
            rep.kept.append(f.path)
            continue
        if on_file is not None:
            on_file(f, source_url(ds, f, source))
        fetch_file(ds, f, dest, source, progress)
        rep.fetched.append(f.path)
    return rep


def verify(ds: Dataset, folder: Path) -> dict[str, str]:
    """Each file's :func:`file_state` in ``folder`` (full sha256 check)."""
    return {f.path: file_state(folder, ds, f) for f in ds.files}
