"""The ``raytestbed data`` command: ``list``, ``fetch NAME [--from SOURCE]``, ``verify [NAME ...]``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from raytestbed.data import catalogue as cat
from raytestbed.data.catalogue import Dataset
from raytestbed.data.fetch import fetch, file_state, verify
from raytestbed.data.store import ENV_VAR, data_dirs, fetch_dir
from raytestbed.errors import DataError
from raytestbed.results.tables import text_table


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


def _where(ds: Dataset, dirs: list[Path]) -> str:
    """``yes (FOLDER)``, ``partly (k of n files; FOLDER)`` or ``no`` (sizes only: quick)."""
    found: dict[str, Path] = {}
    for f in ds.files:
        for d in dirs:
            if file_state(d, ds, f, check=False) == "ok":
                found[f.path] = d
                break
    if not found:
        return "no"
    where = ", ".join(dict.fromkeys(str(d) for d in found.values()))
    if len(found) < len(ds.files):
        return f"partly ({len(found)} of {len(ds.files)} files; {where})"
    return f"yes ({where})"


def _cmd_list(args) -> int:
    dirs = data_dirs()
    print(f"data folder (fetch writes here): {fetch_dir()}" + ("" if os.environ.get(ENV_VAR) else
                                                                 f"  (set ${ENV_VAR} to use another)"))
    for d in dirs[1:]:
        print(f"also read: {d} (a shared/data folder found above the current folder or the package)")
    sets = cat.catalogue()
    rows = [{"dataset": ds.name, "size": _mb(ds.size), "files": len(ds.files), "present": _where(ds, dirs)}
            for ds in sets.values()]
    print()
    print(text_table(rows, ["dataset", "size", "files", "present"]))
    for ds in sets.values():
        print(f"\n{ds.name}: {ds.title}\n  origin:  {ds.origin}\n  licence: {ds.licence}\n  used by: {ds.used_by}")
    print("\nget one with: raytestbed data fetch NAME (or --from DIR / --from URL: a copy of the data folder)")
    return 0


def _cmd_fetch(args) -> int:
    names = list(cat.catalogue()) if args.all else args.names
    if not names:
        raise DataError("data fetch: give a data set (raytestbed data list) or --all")
    sets = [cat.dataset(n) for n in names]
    dest = Path(args.dir) if args.dir else fetch_dir()
    bar = None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        tqdm = None
    for ds in sets:
        def on_file(f, url, ds=ds):
            nonlocal bar
            print(f"{ds.name}/{f.path}: {_mb(f.size)} from {url}", flush=True)
            if bar is not None:
                bar.close()
            bar = tqdm(total=f.size, unit="B", unit_scale=True, leave=False, disable=args.quiet or None,
                       file=sys.stderr) if tqdm is not None else None

        try:
            rep = fetch(ds, dest, args.source, force=args.force, on_file=on_file,
                        progress=(lambda n: bar.update(n) if bar is not None else None))
        finally:
            if bar is not None:
                bar.close()
                bar = None
        kept = f", {len(rep.kept)} already present" if rep.kept else ""
        print(f"{ds.name}: {len(rep.fetched)} file(s) fetched{kept}, all checked (sha256) in {dest / ds.name}")
    return 0


def _cmd_verify(args) -> int:
    dirs = [Path(args.dir)] if args.dir else data_dirs()
    names = args.names or list(cat.catalogue())
    bad = 0
    for name in names:
        ds = cat.dataset(name)
        for d in dirs:
            if not (d / ds.name).is_dir():
                continue
            states = verify(ds, d)
            wrong = {p: s for p, s in states.items() if s not in ("ok", "missing")}
            missing = [p for p, s in states.items() if s == "missing"]
            ok = len(states) - len(wrong) - len(missing)
            more = f", {len(missing)} missing" if missing else ""
            print(f"{ds.name} in {d}: {ok} of {len(states)} files ok{more}")
            for p, s in wrong.items():
                print(f"  {p}: {s} (fetch again: raytestbed data fetch {ds.name} --force)")
            bad += len(wrong) + (len(missing) if args.names else 0)
            break
        else:
            print(f"{ds.name}: not present" + (f" (raytestbed data fetch {ds.name})" if args.names else ""))
            bad += 1 if args.names else 0
    return 1 if bad else 0


def add_parser(sub) -> None:
    """Add ``data`` and its subcommands to the ``raytestbed`` parser's subparsers ``sub``."""
    dp = sub.add_parser("data", help="the public data sets: list, fetch, verify (docs/trials.md, 'Data')")
    ds = dp.add_subparsers(dest="data_command", required=True)
    ls = ds.add_parser("list", help="every data set the loaders know: size, origin, licence, present or not")
    ls.set_defaults(fn=_cmd_list)
    fe = ds.add_parser("fetch", help="download data sets into the data folder, checked against their sha256")
    fe.add_argument("names", nargs="*", metavar="NAME", help="data sets (raytestbed data list)")
    fe.add_argument("--all", action="store_true", help="every data set")
    fe.add_argument("--from", dest="source", metavar="SOURCE",
                    help="a copy of the data folder instead of the origin: a folder or a file://, http:// or "
                         "https:// URL (SOURCE/NAME/FILE)")
    fe.add_argument("--dir", help=f"data folder to write (default: ${ENV_VAR}, else the per-user folder)")
    fe.add_argument("--force", action="store_true", help="download again even if present and correct")
    fe.add_argument("--quiet", action="store_true", help="no progress bar")
    fe.set_defaults(fn=_cmd_fetch)
    ve = ds.add_parser("verify", help="check present data sets against their sha256 (exit 1 on a mismatch)")
    ve.add_argument("names", nargs="*", metavar="NAME", help="data sets (default: every one present)")
    ve.add_argument("--dir", help="data folder to check (default: the folders searched)")
    ve.set_defaults(fn=_cmd_verify)
