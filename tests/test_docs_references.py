"""The documentation names only what exists, and holds no run diary.

README.md and every Markdown file under docs/ are read. Checked:

* every command it shows in code (backticks or a fenced block): ``raytestbed SUBCOMMAND`` names a
  subcommand of the CLI parser, ``raytestbed bench NAME`` a benchmark the parser accepts, and
  ``make TARGET`` a target of the Makefile;
* every repository path it names (``docs/x.md``, ``scripts/x.py``, ``benchmarks/...``,
  ``workloads/trials/x.yaml``, ``raytestbed/...py``, ``tests/x.py::test_name``, and the package's
  own files written without ``raytestbed/``, e.g. ``sim/flownet.py``) exists; paths under
  ``results/`` and ``OUT/`` and the ``--out`` of a command are written by commands and are exempt,
  as are placeholders (``TRIAL.yaml``, ``*``);
* every Markdown link to a file of the repository points at an existing file and heading, and every
  section cited as ``docs/x.md, "Heading"`` is a heading of that page;
* docs/ holds under 1 MB of non-Markdown (generated) files, no dated runs (no ISO dates) and no
  paths of one machine (/work/, /home/, /tmp/).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from raytestbed.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

#: folders of the repository a doc may name from the root
TOP = ("docs", "scripts", "benchmarks", "workloads", "raytestbed", "tests", "cluster_configs", "examples")
#: the package's own folders, which docs also name without the leading ``raytestbed/``
PACKAGE = tuple(p.name for p in (ROOT / "raytestbed").iterdir() if p.is_dir() and not p.name.startswith("_")
                and p.name != "results")
_PATH = re.compile(r"(?<![\w./~-])((?:%s)/[\w./-]*[\w/])(?:::(\w+))?" % "|".join(TOP + PACKAGE))
_CODE = re.compile(r"```.*?```|`[^`\n]+`", re.S)
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _code(text: str) -> str:
    return "\n".join(m.group(0).strip("`") for m in _CODE.finditer(text))


def _subcommands() -> tuple[set[str], set[str]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    bench = next(a for a in sub.choices["bench"]._actions if a.dest == "name")
    return set(sub.choices), set(bench.choices)


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^([A-Za-z][\w-]*)\s*:(?!=)", text, re.M)}


def _is_placeholder(path: str) -> bool:
    stems = [Path(part).stem for part in path.split("/")]
    return any(c in path for c in "*{}<>") or any(s.isupper() and len(s) > 1 for s in stems)


def _exists(path: str) -> bool:
    bases = [ROOT] + ([ROOT / "raytestbed"] if path.split("/")[0] in PACKAGE else [])
    return any((b / path.rstrip("/")).exists() for b in bases)


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


def missing_commands(text: str) -> list[str]:
    """Commands shown in ``text``'s code that the CLI or the Makefile does not have."""
    subcommands, benches = _subcommands()
    targets = _make_targets()
    code, bad = _code(text), []
    for m in re.finditer(r"(?:^|[\s;&|(])(?:\S*/)?raytestbed[ \t]+([a-z][\w-]*)(?:[ \t]+([a-z][\w-]*))?", code, re.M):
        line_start = code.rfind("\n", 0, m.start()) + 1
        if re.search(r"\b(from|import)\s*$", code[line_start:m.start(1)].replace("raytestbed", "")):
            continue  # a Python import, not a command
        if m.group(1) not in subcommands:
            bad.append(f"raytestbed {m.group(1)}")
        elif m.group(1) == "bench" and m.group(2) and m.group(2) not in benches:
            bad.append(f"raytestbed bench {m.group(2)}")
    for m in re.finditer(r"(?:^|[\s;&|(])make[ \t]+([a-z][\w-]*)", code, re.M):
        if m.group(1) not in targets:
            bad.append(f"make {m.group(1)}")
    return bad


def missing_paths(text: str) -> list[str]:
    """Repository paths and pytest node ids named in ``text`` that do not exist."""
    bad = []
    for m in _PATH.finditer(text):
        path, test = m.group(1), m.group(2)
        if _is_placeholder(path) or re.search(r"--out[ =]$", text[max(0, m.start() - 6):m.start()]):
            continue  # a placeholder, or a file the command writes
        if path.split("/")[0] in PACKAGE and "." not in path.rsplit("/", 1)[-1]:
            continue  # prose such as "placement/admission"; the package's files are checked by name
        if not _exists(path):
            bad.append(path)
        elif test and not re.search(rf"def {test}\b", (ROOT / path).read_text(encoding="utf-8")):
            bad.append(f"{path}::{test}")
    return bad


def broken_links(doc: Path, text: str) -> list[str]:
    """Markdown links from ``doc`` to files of the repository that do not exist (or lack the heading)."""
    bad = []
    for m in _LINK.finditer(text):
        target = m.group(1)
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve()
        if not dest.exists():
            bad.append(target)
        elif anchor and dest.suffix == ".md":
            headings = re.findall(r"^#+\s+(.*)$", dest.read_text(encoding="utf-8"), re.M)
            if anchor not in {_slug(h) for h in headings}:
                bad.append(target)
    return bad


def missing_sections(text: str) -> list[str]:
    """Sections cited as ``docs/x.md, "Heading"`` that no heading of that page contains."""
    bad = []
    for m in re.finditer(r"(docs/[\w/]+\.md)`?,\s+\"([^\"]+)\"", text):
        page = ROOT / m.group(1)
        if not page.exists():
            continue  # reported as a missing path
        headings = [h.replace("`", "") for h in re.findall(r"^#+\s+(.*)$", page.read_text(encoding="utf-8"), re.M)]
        cited = " ".join(m.group(2).replace("`", "").split())  # a citation may wrap over lines
        if not any(cited in h for h in headings):
            bad.append(f'{m.group(1)}, "{m.group(2)}"')
    return bad


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_a_doc_shows_exists(doc):
    assert missing_commands(doc.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_a_doc_names_exists(doc):
    text = doc.read_text(encoding="utf-8")
    assert missing_paths(text) == []
    assert broken_links(doc, text) == []
    assert missing_sections(text) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_hold_no_dated_runs_and_no_machine_paths(doc):
    text = doc.read_text(encoding="utf-8")
    assert re.findall(r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b", text) == []
    assert re.findall(r"(?<![\w.])/(?:work|home|tmp)/\S*", text) == []


def test_docs_hold_under_a_megabyte_of_generated_files():
    generated = [p for p in (ROOT / "docs").rglob("*") if p.is_file() and p.suffix != ".md"]
    assert sum(p.stat().st_size for p in generated) < 1_000_000


def test_the_checks_fail_on_what_they_guard_against():
    assert missing_paths("see `docs/no_such_page.md` and scripts/no_such_script.py") == [
        "docs/no_such_page.md", "scripts/no_such_script.py"]
    assert missing_paths("`tests/test_docs_references.py::test_no_such_test`") == [
        "tests/test_docs_references.py::test_no_such_test"]
    assert missing_paths("`results/x/jobs.csv`, `OUT/fig5/`, `workloads/trials/TRIAL.yaml`") == []
    assert missing_commands("`raytestbed frobnicate x`, `raytestbed bench nosuch`, `make nosuch`") == [
        "raytestbed frobnicate", "raytestbed bench nosuch", "make nosuch"]
    assert missing_commands("`raytestbed run t.yaml`; `make test`; `from raytestbed import api`") == []
    assert broken_links(ROOT / "docs" / "results.md", "[x](benchmarks.md#no-such-heading) [y](gone.md)") == [
        "benchmarks.md#no-such-heading", "gone.md"]
    assert missing_sections('(docs/benchmarks.md, "No such section"; docs/results.md, "Diagnoses")') == [
        'docs/benchmarks.md, "No such section"']
