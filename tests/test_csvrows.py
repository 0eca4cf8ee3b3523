"""csv_rows: the one header/row check behind every CSV trace loader."""

import gzip
import re

import pytest

from raytestbed.errors import TraceError
from raytestbed.traces.csvrows import csv_rows


def _write(path, text):
    path.write_text(text)
    return path


def test_rows_with_their_place(tmp_path):
    p = _write(tmp_path / "t.csv", "a,b,c\n1,2,3\n\n4,5,6\n")
    rows = list(csv_rows(p, ("b", "a")))
    assert rows == [(f"{p} line 2", {"a": "1", "b": "2", "c": "3"}), (f"{p} line 4", {"a": "4", "b": "5", "c": "6"})]


def test_gzip_and_skipinitialspace(tmp_path):
    p = tmp_path / "t.csv.gz"
    with gzip.open(p, "wt") as f:
        f.write("a, b\n1, 2\n")
    assert list(csv_rows(p, ("a", "b"), skipinitialspace=True)) == [(f"{p} line 2", {"a": "1", "b": "2"})]


@pytest.mark.parametrize("text, kwargs, msg", [
    ("a,c\n1,2\n", {}, "{p}: missing column 'b' (header: a, c)"),
    ("a,b\n1,2\n1,2,3\n", {}, "{p} line 3: more values than columns"),
    ("a,c\n1,2\n", {"required": ("a", ("b", "iterations"))}, "{p}: needs a 'b' or an 'iterations' column"),
    ("a, b,c\n1,2,3\n", {"exact_header": True}, "{p} line 1: expected header a,b, got a,b,c"),
    ("a,b\n1,2\n1\n", {"exact_header": True}, "{p} line 3: 1 values, expected 2"),
])
def test_bad_header_or_row_names_file_and_line(tmp_path, text, kwargs, msg):
    p = _write(tmp_path / "t.csv", text)
    required = kwargs.pop("required", ("a", "b"))
    with pytest.raises(TraceError, match="^" + re.escape(msg.format(p=p)) + "$"):
        list(csv_rows(p, required, **kwargs))


def test_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(TraceError, match="cannot read") as e:
        list(csv_rows(tmp_path / "absent.csv", ("a",)))
    assert "absent.csv" in str(e.value) and "\n" not in str(e.value)
    bad = tmp_path / "t.csv.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(TraceError, match=re.escape(f"{bad}: cannot read")):
        list(csv_rows(bad, ("a",)))
    latin = tmp_path / "l.csv"
    latin.write_bytes(b"a\n\xe9\n")
    with pytest.raises(TraceError, match=re.escape(f"{latin}: cannot read")):
        list(csv_rows(latin, ("a",)))


def test_exact_header_rows_are_keyed_by_column(tmp_path):
    p = _write(tmp_path / "t.csv", " x , y\n1,2\n\n3,4\n")
    assert [r for _, r in csv_rows(p, ("x", "y"), exact_header=True)] == [{"x": "1", "y": "2"}, {"x": "3", "y": "4"}]
