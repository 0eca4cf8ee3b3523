"""Reading a trace CSV row by row, with the header and row shape checked once for every loader.

:func:`csv_rows` opens a CSV file (gzip-compressed if its name ends in ``.gz``), checks that
its header has the required columns, and yields each data row with the place it came from
(``"<file> line <N>"``, N counted as the CSV reader counts lines), so every loader reports a
bad cell as ``<file> line <N>: column 'x': reason``. Problems with the file itself raise
:class:`~raytestbed.errors.TraceError` naming the file (and line, for a bad row shape).
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Iterator, Sequence
from pathlib import Path

from raytestbed.errors import TraceError


def _open(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", newline="", encoding="utf-8")
    return open(path, newline="", encoding="utf-8")


def csv_rows(path: Path | str, required: Sequence[str | tuple[str, ...]], *, exact_header: bool = False,
             skipinitialspace: bool = False) -> Iterator[tuple[str, dict[str, str | None]]]:
    """Yield ``(where, row)`` for every data row of the CSV file ``path``.

    ``where`` is ``"<path> line <N>"``; ``row`` maps column name -> cell text.

    Args:
        path: the file; a name ending in ``.gz`` is read through gzip.
        required: columns the header must have (any order; other columns allowed), else
            ``TraceError("<path>: missing column 'x' (header: ...)")``; an entry that is a
            tuple of names needs at least one of them. A row with more values than columns
            raises ``"<where>: more values than columns"``.
        exact_header: the header (cells stripped) must be exactly ``required``, else
            ``"<path> line 1: expected header ..., got ..."``; every non-empty row must then
            have exactly that many values (``"<where>: N values, expected M"``).
        skipinitialspace: ignore blanks after each delimiter (``csv`` dialect option).

    Raises:
        TraceError: the file cannot be opened or decoded, or its header/row shape is wrong.
    """
    path = Path(path)
    try:
        f = _open(path)
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror or e}") from None
    with f:
        try:
            if exact_header:
                yield from _exact_rows(f, path, tuple(required), skipinitialspace)
            else:
                yield from _dict_rows(f, path, required, skipinitialspace)
        except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError, csv.Error) as e:
            raise TraceError(f"{path}: cannot read: {e}") from None


def _dict_rows(f, path: Path, required, skipinitialspace: bool):
    reader = csv.DictReader(f, skipinitialspace=skipinitialspace)
    header = reader.fieldnames or []
    for col in required:
        if isinstance(col, tuple):
            if not any(c in header for c in col):
                raise TraceError(f"{path}: needs " + " or ".join(f"{_a(c)} {c!r}" for c in col) + " column")
        elif col not in header:
            raise TraceError(f"{path}: missing column {col!r} (header: {', '.join(header)})")
    for row in reader:
        where = f"{path} line {reader.line_num}"
        if None in row:
            raise TraceError(f"{where}: more values than columns")
        yield where, row


def _a(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _exact_rows(f, path: Path, columns: tuple[str, ...], skipinitialspace: bool):
    reader = csv.reader(f, skipinitialspace=skipinitialspace)
    header = [h.strip() for h in next(reader, [])]
    if tuple(header) != columns:
        raise TraceError(f"{path} line 1: expected header {','.join(columns)}, got {','.join(header)}")
    for rec in reader:
        where = f"{path} line {reader.line_num}"
        if not rec:
            continue
        if len(rec) != len(columns):
            raise TraceError(f"{where}: {len(rec)} values, expected {len(columns)}")
        yield where, dict(zip(columns, rec))
