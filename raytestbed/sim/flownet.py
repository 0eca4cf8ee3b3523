"""The flow simulator's network: every active flow in numpy arrays.

One row per active flow, rows ordered by job arrival (then job id; a job has at most one active
coflow, its flows in coflow order) -- the order network policies see in ``view.flows()``. Per
row: serial number (the flow's key), owner job, flow id parts, source and destination server,
link group, bytes left and total, completion threshold, rate and the network policy's rate (NaN
where it set none).

* **Groups.** Fabric flows between the same two servers cross the same links; they are one
  group of the allocator (:func:`~raytestbed.network.allocator.grouped_max_min_rates`), so an
  allocation costs O(links^2 + groups), not O(flows x rounds). Intra-server flows cross no link
  and run at ``intra_bps``.
* **Rates** are recomputed only when their inputs changed (flows added or removed, job weights,
  policy rates): otherwise the last ones are exactly what a recomputation would give.
* **Progress** (:meth:`FlowNet.advance`) brings every flow to a time from its anchor (bytes left
  at the anchor time, rate since: :func:`~raytestbed.core.flows.bytes_left`, the formula the
  emulator's fluid model uses); a row is anchored again only when its rate changed and time then
  passes (or a flow ends at once at its new rate), so its bytes do not depend on the other instants
  the simulation stops at. Completions (:meth:`FlowNet.complete`) end every flow at or below its
  threshold in one step; the next completion is the earliest anchored finish time
  (:func:`~raytestbed.core.flows.finish_time`). These visit only the rows with a positive rate
  (kept as an index until rows or rates change): a row at rate 0 cannot reach its threshold,
  except a row added at or below it, or one that got there before its rate went to 0 -- then the
  next completion step looks at every row. Ended rows stay (rate 0, not alive) until they are many or a policy
  reads the table, then go in one compaction.

Units: bytes, bytes/s, seconds.
"""

from __future__ import annotations

import math
from dataclasses import replace
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.core.flows import MIN_BYTES, FlowRates, Flows, LazyFlowIds, LinkIndex
from raytestbed.core.job import Job
from raytestbed.core.state import CoflowInfo, FlowInfo
from raytestbed.errors import PolicyError
from raytestbed.sim import kernels

_NO_ROWS = np.zeros(0, dtype=np.int64)  #: no rows (never written to)
_EPS_BYTES = 1e-6  #: a flow with at most this many bytes left is complete (or 1e-12 of its size if larger)

_INT_COLS = ("uid", "rank", "num", "src", "dst", "grp")
_FLOAT_COLS = ("rem", "total", "eps", "rate", "ovr", "share", "rem0", "t0", "arate", "fin")


_WATERFILL: tuple = ()


def _waterfill() -> tuple:
    """The compiled (numba) allocation passes ``(link_members, net_rates)``, imported on first use."""
    global _WATERFILL
    if not _WATERFILL:
        from raytestbed.network.waterfill import link_members, net_rates
        _WATERFILL = (link_members, net_rates)
    return _WATERFILL


class FlowNet:
    """The active flows of one simulation (module docstring).

    Args:
        cluster: the cluster (links: :class:`~raytestbed.core.flows.LinkIndex` numbering).
        jobs: every job of the run (their arrival order fixes the row order).
    """

    def __init__(self, cluster: Cluster, jobs: Sequence[Job]) -> None:
        self.cluster = cluster
        self.links = LinkIndex(cluster)
        self.capacity = self.links.capacity.copy()  #: current link capacities, bytes/s (slow_nic lowers some)
        self.intra_bps = float(cluster.intra_bps)
        order = sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))
        self.rank_of = {j.job_id: r for r, j in enumerate(order)}
        self.jid_of_rank = np.array([j.job_id for j in order], dtype=np.int64)
        self.job_w = np.ones(len(order))  #: weight of each job's flows (by rank)
        n = cluster.num_servers
        self._n = n
        self._k = 4 if cluster.racks else 2
        self._pair_group = np.full(n * n, -1, dtype=np.int64) if n * n <= (1 << 22) else None
        self._pair_dict: dict[int, int] = {}
        self._glinks = np.full((64, self._k), -1, dtype=np.int64)
        self._n_groups = 0
        # the columns live in two blocks, one row per column (``_ints``: int64, ``_floats``: float64), and
        # ``alive``; each column's attribute is a view of its row, so inserting or dropping rows is three
        # array operations (:meth:`_set_rows`)
        self._set_rows(np.zeros((len(_INT_COLS), 0), dtype=np.int64), np.zeros((len(_FLOAT_COLS), 0)),
                       np.zeros(0, dtype=bool))
        self.n_dead = 0  #: ended rows not yet compacted away
        self.live_count = np.zeros(len(order), dtype=np.int64)  #: alive flows per job rank
        self.sent_dirty = np.zeros(len(order), dtype=bool)  #: ranks whose bytes sent changed since the last sync (:meth:`take_sent`)
        self._sent_moved = False  #: ``sent_dirty`` may have flags (bytes moved or flows ended since the last sync)
        #: bytes of each job's (by rank) flows that ended in its current run, their sizes summed in the order
        #: they ended (with the bytes its flows in flight moved: what it sent, counted as the emulator counts)
        self.done = np.zeros(len(order))
        self._next_uid = 0
        self.now = 0.0  #: the time (s) the rows' bytes left are of
        self._pending = False  #: rates were set since the rows were last anchored
        self.version = 0  #: changes whenever rows are added or removed
        self._moved = 0  #: changes whenever bytes move
        self.stale = True  #: rates must be recomputed
        self.coflow: dict[int, tuple] = {}  #: job rank -> (coflow id, start sequence, start time s, bytes)
        self._seq = 0
        self._blocks: tuple | None = None
        self._checked = False  #: the policy rates passed the capacity check; none set since
        self._table: tuple | None = None
        self._rows_table: tuple | None = None  #: ((version, coflow ids), the table's parts that bytes do not move)
        self._infos: tuple | None = None
        self._members: tuple | None = None  #: (groups, ptr, members): link -> groups index of the allocator
        self._moving: np.ndarray | None = None  #: rows with a positive rate (None: find them again)
        self._due = 0  #: rows that reached their threshold while moving since the last completion step
        self._scan_all = False  #: the next completion step looks at every row
        self._free: int | None = None  #: alive rows without a policy rate (None: count them again)
        self._fixed: int | None = None  #: rows with a policy rate (None: count them again)
        self._mbuf = np.empty(0, dtype=np.int64)  #: buffer behind ``_moving``
        self._gbuf = np.empty((2, 0))  #: the allocation's buffer (``_group_scratch``)
        self._eps_max = _EPS_BYTES  #: >= every row's completion threshold (bytes)
        self._due_rows: np.ndarray | None = np.zeros(0, np.int64)  #: rows the last advance left at their threshold
        self._advances = 0  #: advances since the last completion step
        self._next: float | None = None  #: time (s) of the next completion (None: find it again)
        #: (job ranks, keys) of the flows the last completion step ended, in row order (by job)
        self.ended = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))

    def __len__(self) -> int:
        """Alive flows."""
        return int(self.rem.size) - self.n_dead

    # ------------------------------------------------------------------ structure
    def _groups_of(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Group id of every fabric flow src -> dst (new server pairs get a new group)."""
        n = self._n
        key = src * n + dst
        if self._pair_group is not None:
            g = self._pair_group[key]
            new = np.unique(key[g < 0])
        else:
            g = np.array([self._pair_dict.get(k, -1) for k in key.tolist()], dtype=np.int64)
            new = np.unique(key[g < 0])
        if new.size:
            for k in new.tolist():
                s, d = divmod(k, n)
                gid = self._n_groups
                if gid == self._glinks.shape[0]:
                    self._glinks = np.concatenate([self._glinks, np.full_like(self._glinks, -1)])
                self._glinks[gid, :] = -1
                row = self._link_cols(s, d)
                self._glinks[gid, :len(row)] = row
                self._n_groups += 1
                if self._pair_group is not None:
                    self._pair_group[k] = gid
                else:
                    self._pair_dict[k] = gid
            if self._pair_group is not None:
                g = self._pair_group[key]
            else:
                g = np.array([self._pair_dict[k] for k in key.tolist()], dtype=np.int64)
        return g

    def _link_cols(self, s: int, d: int) -> list[int]:
        """Link indices (LinkIndex numbering: egress, ingress, rack up, rack down) of src -> dst."""
        n, li = self._n, self.links
        cols = [s, n + d]
        rs, rd = int(li.rack[s]), int(li.rack[d])
        if rs >= 0 and rd >= 0 and rs != rd:
            cols += [2 * n + rs, 2 * n + li.n_racks + rd]
        return cols

    def link_id(self, col: int):
        """The cluster's id of link ``col`` (LinkIndex numbering)."""
        n, r = self._n, self.links.n_racks
        if col < n:
            return ("egress", col)
        if col < 2 * n:
            return ("ingress", col - n)
        if col < 2 * n + r:
            return ("rack_up", col - 2 * n)
        return ("rack_down", col - 2 * n - r)

    def add_coflow(self, jid: int, coflow_id: tuple, src: np.ndarray, dst: np.ndarray, vol: np.ndarray,
                   now: float) -> float:
        """Add job ``jid``'s coflow ``coflow_id`` = (job, cycle, index): flows ``src[k] -> dst[k]`` of
        ``vol[k]`` bytes; returns their sum (bytes, added in flow order)."""
        r = self.rank_of[jid]
        total = sum(np.asarray(vol, dtype=float).tolist(), 0.0)
        self._seq += 1
        self.coflow[r] = (coflow_id, self._seq, now, total)
        self._insert(r, src, dst, vol, 0, after=False)
        return total

    def add_flows(self, jid: int, coflow_id: tuple, src: np.ndarray, dst: np.ndarray, vol: np.ndarray,
                  now: float) -> np.ndarray:
        """Add flows to job ``jid``'s open coflow, after its rows (opening ``coflow_id`` if the job has
        none): the transfers of a pipeline job, which its workers start one by one
        (:mod:`raytestbed.sim.pipeline_workers`). Returns the new flows' keys."""
        r = self.rank_of[jid]
        cur = self.coflow.get(r)
        add = sum(vol.tolist() if isinstance(vol, np.ndarray) else [float(v) for v in vol], 0.0)
        if cur is None:
            self._seq += 1
            self.coflow[r] = (coflow_id, self._seq, now, add)
            first = 0
        else:
            self.coflow[r] = (*cur[:3], cur[3] + add)
            a, b = self.rank.searchsorted([r, r + 1]).tolist()
            if self.n_dead:  # (numbered after its last alive row: the rows left once the ended ones go)
                live = np.flatnonzero(self.alive[a:b])
                b = a + int(live[-1]) + 1 if live.size else a
            first = int(self.num[b - 1]) + 1 if b > a else 0
        return self._insert(r, src, dst, vol, first, after=True)

    def set_shares(self, jid: int, keys, shares) -> None:
        """The flows ``keys`` of job ``jid`` each get their ``shares`` (their parts of their connections' rates)."""
        self.compact()
        r = self.rank_of[jid]
        a, b = self.rank.searchsorted([r, r + 1]).tolist()
        sub = self.uid[a:b]
        keys = np.asarray(keys, dtype=np.int64)
        order = np.argsort(sub, kind="stable")
        rows = a + order[np.minimum(np.searchsorted(sub, keys, sorter=order), max(sub.size - 1, 0))]
        if keys.size and (sub.size == 0 or np.any(self.uid[rows] != keys)):
            raise KeyError(f"job {jid}: no active flow {keys[np.argmax(self.uid[rows] != keys)] if sub.size else keys[0]}")
        shares = np.asarray(shares, dtype=float)
        if np.any(self.share[rows] != shares):
            self.share[rows] = shares
            self.stale = True

    def _set_rows(self, ints: np.ndarray, floats: np.ndarray, alive: np.ndarray) -> None:
        """Make these blocks the table (their rows the columns ``_INT_COLS``, ``_FLOAT_COLS``)."""
        self._ints, self._floats, self.alive = ints, floats, alive
        self.uid, self.rank, self.num, self.src, self.dst, self.grp = ints
        self.rem, self.total, self.eps, self.rate, self.ovr, self.share, self.rem0, self.t0, self.arate, self.fin = floats

    def _splice(self, r: int, after: bool, ints: np.ndarray, floats: np.ndarray) -> None:
        """Drop the ended rows (:meth:`compact`) and insert these alive rows of job rank ``r`` after its
        rows (``after``) or before them, in one pass."""
        if self.n_dead:
            self.n_dead = 0
            self._changed()  # (as :meth:`compact`)
        self._set_rows(*kernels.splice_rows(self._ints, self._floats, self.alive, r, after, ints, floats))
        self._changed()

    def _insert(self, r: int, src, dst, vol, first_num: int, after: bool) -> np.ndarray:
        """Insert flows of job rank ``r`` (numbered from ``first_num``) before or after its rows; their keys."""
        m = len(vol)
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        ints, floats = (self._new_rows_few if m <= 32 else self._new_rows)(r, src, dst, vol, first_num)
        self._next_uid += m
        self.live_count[r] += m
        self._scan_all = True  # (a flow of at most its threshold's bytes ends at the next step)
        fixed, free = self._fixed, self._free
        self._splice(r, after, ints, floats)
        # (the counts stay known: the new rows are alive without a policy rate, the dropped ones ended
        # and had none left)
        self._fixed, self._free = fixed, (None if free is None else free + m)
        return ints[0].copy()

    def _new_rows(self, r: int, src, dst, vol, first_num: int) -> tuple[np.ndarray, np.ndarray]:
        """The blocks (``_INT_COLS``, ``_FLOAT_COLS``) of new rows of job rank ``r``."""
        vol = np.asarray(vol, dtype=float)
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        m = vol.size
        ints = np.empty((len(_INT_COLS), m), dtype=np.int64)
        uids, rank, num, isrc, idst, grp = ints
        uids[:] = np.arange(self._next_uid, self._next_uid + m)
        rank[:] = r
        num[:] = np.arange(first_num, first_num + m)
        isrc[:] = src
        idst[:] = dst
        grp[:] = -1
        fab = src != dst
        if fab.any():
            grp[fab] = self._groups_of(src[fab], dst[fab])
        floats = np.empty((len(_FLOAT_COLS), m))
        rem, total, eps, rate, ovr, share, rem0, t0, arate, fin = floats
        rem[:] = vol
        total[:] = vol
        np.maximum(_EPS_BYTES, 1e-12 * vol, out=eps)
        rate[:] = 0.0
        ovr[:] = np.nan
        share[:] = 1.0
        rem0[:] = vol  # anchored now (bytes left at :attr:`now`, rate 0 until the next allocation)
        t0[:] = self.now
        arate[:] = 0.0
        fin[:] = np.inf
        self._eps_max = max(self._eps_max, float(eps.max()))
        return ints, floats

    def _new_rows_few(self, r: int, src, dst, vol, first_num: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_new_rows` built from lists (the same values): for a few flows, where numpy's cost per
        call would dominate."""
        vol = [float(v) for v in (vol.tolist() if isinstance(vol, np.ndarray) else vol)]
        src = [int(v) for v in (src.tolist() if isinstance(src, np.ndarray) else src)]
        dst = [int(v) for v in (dst.tolist() if isinstance(dst, np.ndarray) else dst)]
        m, n, pairs = len(vol), self._n, self._pair_group
        if pairs is not None:
            grp = [-1 if s == d else int(pairs[s * n + d]) for s, d in zip(src, dst)]
        else:
            grp = [-1 if s == d else self._pair_dict.get(s * n + d, -1) for s, d in zip(src, dst)]
        fab = [k for k in range(m) if src[k] != dst[k]]
        if any(grp[k] < 0 for k in fab):  # a new server pair: its group (as :meth:`_new_rows` numbers it)
            g = self._groups_of(np.array([src[k] for k in fab], dtype=np.int64),
                                np.array([dst[k] for k in fab], dtype=np.int64)).tolist()
            for k, gk in zip(fab, g):
                grp[k] = gk
        eps = [max(_EPS_BYTES, 1e-12 * v) for v in vol]
        self._eps_max = max(self._eps_max, max(eps))
        u0 = self._next_uid
        ints = np.array([range(u0, u0 + m), [r] * m, range(first_num, first_num + m), src, dst, grp], dtype=np.int64)
        floats = np.array([vol, vol, eps, [0.0] * m, [math.nan] * m, [1.0] * m, vol, [self.now] * m, [0.0] * m,
                           [math.inf] * m], dtype=float)
        return ints, floats

    def _keep(self, keep: np.ndarray) -> None:
        if keep.all():
            return
        self._set_rows(self._ints.compress(keep, axis=1), self._floats.compress(keep, axis=1), self.alive[keep])
        self.n_dead = int(self.alive.size - self.alive.sum())
        self._changed()

    def compact(self) -> None:
        """Drop the ended rows now."""
        if self.n_dead:
            self._keep(self.alive)

    def set_nic_factor(self, server: int, factor: float) -> None:
        """Server ``server``'s NIC runs ``factor`` x slower than configured (egress and ingress)."""
        n = self._n
        self.capacity[server] = self.links.capacity[server] / factor
        self.capacity[n + server] = self.links.capacity[n + server] / factor
        self._checked = False
        self._changed()

    def _changed(self) -> None:
        self.version += 1
        self.stale = True
        self._blocks = None
        self._forget_moving()
        self._free = None
        self._fixed = None

    def _forget_moving(self) -> None:
        """Rows or rates changed: the index of moving rows goes (rows that reached their threshold
        meanwhile may now be outside it: the next completion step looks at every row)."""
        self._moving = None
        self._due_rows = None
        self._next = None
        if self._due:
            self._scan_all = True

    def _moving_rows(self) -> np.ndarray:
        """Rows with a positive rate, ascending (after an allocation: a view of the buffer it filled,
        kept between allocations since allocating arrays of every row at every step costs more in
        page faults than the passes themselves)."""
        if self._moving is None:
            self._moving = np.flatnonzero(self.rate > 0.0)
        return self._moving

    def _group_scratch(self) -> np.ndarray:
        """(2, groups) buffer of the allocation (summed weights, levels), kept between allocations."""
        if self._gbuf.shape[1] < self._n_groups:
            self._gbuf = np.empty((2, self._glinks.shape[0]))
        return self._gbuf

    def _moving_buffer(self) -> np.ndarray:
        if self._mbuf.size < self.rem.size:
            self._mbuf = np.empty(2 * self.rem.size, dtype=np.int64)
        return self._mbuf

    def end_coflow(self, rank: int) -> tuple:
        """Forget the (flowless) active coflow of the job of ``rank``; returns its (id, sequence, start s,
        bytes)."""
        return self.coflow.pop(rank)

    def start_job(self, jid: int) -> None:
        """Job ``jid`` starts a run: its bytes sent count from 0."""
        r = self.rank_of[jid]
        self.done[r] = 0.0
        self.sent_dirty[r] = False

    def drop_job(self, jid: int) -> None:
        """Remove every flow of job ``jid`` (stopped or finished)."""
        r = self.rank_of[jid]
        self.coflow.pop(r, None)
        self.live_count[r] = 0
        a, b = self.rank.searchsorted([r, r + 1]).tolist()
        if b > a:
            keep = np.ones(self.rank.size, dtype=bool)
            keep[a:b] = False
            self._keep(keep)

    def detach(self, jid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Take job ``jid``'s flows out of the network as they are (a fast-forward window,
        :mod:`raytestbed.sim.fastforward`: they neither move nor take capacity until :meth:`attach`
        puts them back); its open coflow, its counts and its bytes sent stay. Returns the rows."""
        r = self.rank_of[jid]
        self.compact()
        a, b = self.rank.searchsorted([r, r + 1]).tolist()
        saved = (self._ints[:, a:b].copy(), self._floats[:, a:b].copy(), self.alive[a:b].copy())
        if b > a:
            keep = np.ones(self.rank.size, dtype=bool)
            keep[a:b] = False
            self._keep(keep)
        return saved

    def attach(self, jid: int, saved: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Put back the rows :meth:`detach` took from job ``jid`` (same keys, bytes left and shares;
        their rates are computed again)."""
        if saved[2].size == 0:
            return
        r = self.rank_of[jid]
        floats = saved[1].copy()  # anchored again now, at rate 0 until the next allocation
        rem, rate, rem0, t0, arate, fin = (floats[_FLOAT_COLS.index(c)] for c in ("rem", "rate", "rem0", "t0",
                                                                                  "arate", "fin"))
        rem0[:] = rem
        t0[:] = self.now
        rate[:] = 0.0
        arate[:] = 0.0
        fin[:] = np.inf
        self._splice(r, False, saved[0], floats)
        self._scan_all = True  # (a row may sit at its threshold)

    def blocks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(first row, row count, job rank) of every job's block of rows, in row order."""
        if self._blocks is None:
            rank = self.rank
            if rank.size == 0:
                z = np.zeros(0, dtype=np.int64)
                self._blocks = (z, z, z)
            else:
                first = np.flatnonzero(np.concatenate(([True], rank[1:] != rank[:-1])))
                counts = np.diff(np.append(first, rank.size))
                self._blocks = (first, counts, rank[first])
        return self._blocks

    # ------------------------------------------------------------------ progress
    def advance(self, t: float) -> None:
        """Bring every flow to time ``t`` (s) from its anchor (rows whose rate changed since are
        anchored first, at the time they were last brought to)."""
        if t <= self.now:
            return
        if self.rem.size == 0:
            self.now = t
            return
        if self._pending:
            self._anchor()
        due = kernels.advance(t, self._moving_rows(), self.rem, self.rem0, self.t0, self.rate, self.rank,
                              self.sent_dirty, self.eps, self._eps_max)
        self.now = t
        self._due += due.size
        self._due_rows = due
        self._sent_moved = True
        self._advances += 1
        self._next = None
        self._moved += 1

    def _anchor(self) -> None:
        """Anchor the rows whose rate changed since their anchor at :attr:`now` (their bytes left now)."""
        kernels.reanchor(self.now, self.rem, self.rem0, self.t0, self.arate, self.rate, self.fin)
        self._pending = False

    def _finish_now(self) -> None:
        """Rows whose new rate ends them at once (finish time at :attr:`now`): anchor every changed row
        now and bring those to 0 bytes left, as the fluid model does."""
        rows = self._moving_rows()
        if not kernels.ends_now(rows, self.now, self.rem, self.rate, self.arate):
            return
        self._anchor()  # (the other rows: brought to now again, the same bytes)
        kernels.advance(self.now, rows, self.rem, self.rem0, self.t0, self.rate, self.rank, self.sent_dirty,
                        self.eps, self._eps_max)
        self._sent_moved = True
        self._scan_all = True
        self._moved += 1

    def mark_sent(self, rank: int) -> None:
        """Job ``rank``'s bytes sent changed (its ``done`` did): the next :meth:`take_sent` reports it."""
        self.sent_dirty[rank] = True
        self._sent_moved = True

    def take_sent(self) -> list[tuple[int, float]]:
        """[(job rank, bytes sent in its current run)] of the jobs whose count changed since the last call."""
        if not self._sent_moved:
            return []
        self._sent_moved = False
        ranks, has, vals, starts = kernels.sent_segments(self.sent_dirty, self.rank, self.alive, self.total, self.rem)
        if ranks.size == 0:
            return []
        # (each rank's rows summed as ``np.add.reduceat`` over every rank's block of rows sums them)
        sums = iter(np.add.reduceat(vals, starts).tolist() if starts.size else ())
        done = self.done
        return [(r, float(done[r] + next(sums)) if h else float(done[r]))
                for r, h in zip(ranks.tolist(), has.tolist())]

    def complete(self) -> list[int]:
        """End every alive flow at or below its completion threshold (its bytes left count as sent).
        Returns the job ranks whose coflow has no flow left, by coflow start."""
        if self._pending:
            self._finish_now()
        if self._scan_all:
            rows_in = np.arange(self.rem.size)
        elif self._due_rows is not None and self._advances <= 1:
            rows_in = self._due_rows  # (every row at its threshold now: those the one advance left there)
        else:
            rows_in = self._moving_rows()
        self._scan_all = False
        self._due = 0
        self._advances = 0
        rows, ranks, keys, free_ended, emptied = kernels.end_done_books(
            rows_in, self.rem, self.eps, self.alive, self.rank, self.uid, self.total, self.sent_dirty,
            self.rate, self.ovr, self.done, self.live_count)
        self.ended = (ranks, keys)
        self._due_rows = _NO_ROWS
        if rows.size:  # an ended row keeps no anchor
            self.rem0[rows] = 0.0
            self.arate[rows] = 0.0
            self.fin[rows] = np.inf
        if rows.size == 0:
            return []
        self._sent_moved = True
        self._next = None
        emptied = emptied.tolist()
        self.n_dead += int(rows.size)
        if self._free is not None:
            self._free -= free_ended
        if self._fixed is not None:
            self._fixed -= int(rows.size) - free_ended  # (an ended row's policy rate goes)
        if free_ended or self._free_rows():
            self.stale = True  # max-min rates change; policy rates of the other flows do not
        if self.n_dead > 1024 and 2 * self.n_dead > self.alive.size:
            self.compact()
            self._due_rows = _NO_ROWS
        if len(emptied) > 1:
            emptied.sort(key=lambda r: self.coflow[r][1])
        return emptied

    def _free_rows(self) -> int:
        """Alive rows without a policy rate (counted again after rows or policy rates changed)."""
        if self._free is None:
            self._free = int(kernels.free_alive(self.alive, self.ovr))
        return self._free

    def next_completion(self) -> float:
        """Time (s) when the first flow at a positive rate is done (inf if none moves): the earliest
        finish time of the rows' anchors (a row whose rate changed: anchored at :attr:`now`)."""
        if self._next is None:
            self._next = float(kernels.next_finish(self._moving_rows(), self.now, self.rem, self.rate, self.arate,
                                                   self.fin))
        return self._next

    # ------------------------------------------------------------------ rates
    def set_job_weight(self, jid: int, weight: float) -> None:
        """Weight (> 0) of job ``jid``'s flows in the max-min allocation."""
        self.job_w[self.rank_of[jid]] = weight
        self.stale = True

    def set_policy_rates(self, rates: Mapping) -> None:
        """Policy rates (bytes/s): a :class:`FlowRates` (applied by flow key) or flow id -> rate."""
        if isinstance(rates, FlowRates) and rates.flows.key is not None:
            fl = rates.flows
            if fl.owner is self and fl.version == self.version:
                rows, vals = slice(None), rates.rates
            else:
                rows = self._rows_of_keys(fl.key, fl.flow_ids)
                vals = rates.rates
        else:
            items = list(rates.items())
            rows = self._rows_of_ids([f for f, _ in items])
            self.compact()  # (row_of compacted already; keeps the rows valid)
            vals = np.array([float(v) for _, v in items], dtype=float)
        self.ovr[rows] = vals
        self.stale = True
        self._checked = False
        self._free = None
        self._fixed = None

    def _rows_of_keys(self, keys: np.ndarray, ids: Sequence[tuple]) -> np.ndarray:
        self.compact()
        order = np.argsort(self.uid, kind="stable")
        at = np.searchsorted(self.uid, keys, sorter=order)
        at = np.minimum(at, max(self.uid.size - 1, 0))
        rows = order[at] if self.uid.size else np.zeros(keys.size, dtype=np.int64)
        bad = (self.uid.size == 0) | (self.uid[rows] != keys) if self.uid.size else np.ones(keys.size, bool)
        if np.any(bad):
            raise PolicyError(f"SetFlowRates for unknown flow {ids[int(np.argmax(bad))]}")
        return rows

    def _rows_of_ids(self, fids: Iterable[tuple]) -> np.ndarray:
        rows = []
        for fid in fids:
            row = self.row_of(fid)
            if row is None:
                raise PolicyError(f"SetFlowRates for unknown flow {fid}")
            rows.append(row)
        return np.array(rows, dtype=np.int64)

    def row_of(self, fid) -> int | None:
        """Row of flow id (job, cycle, coflow index, flow number), or None if it is not active."""
        try:
            jid, cyc, idx, num = fid
            r = self.rank_of[jid]
        except (TypeError, ValueError, KeyError):
            return None
        cur = self.coflow.get(r)
        if cur is None or cur[0] != (jid, cyc, idx):
            return None
        self.compact()
        a, b = self.rank.searchsorted([r, r + 1]).tolist()
        k = a + int(np.searchsorted(self.num[a:b], num))
        return k if k < b and self.num[k] == num else None

    def reallocate(self) -> None:
        """Recompute the rates if their inputs changed: policy rates where set (checked against the
        link capacities), weighted max-min on the capacity they leave for the other flows."""
        if not self.stale:
            return
        self.stale = False
        link_members, net_rates = _waterfill()

        cap = self.capacity
        glinks = self._glinks[:self._n_groups]
        if self._members is None or self._members[0] != self._n_groups:
            self._members = (self._n_groups, *link_members(glinks, cap.size))
        ptr, members = self._members[1:]
        if self._n_fixed():
            if self._free_rows() or not self._checked:  # (flows only ended since the last check: it would pass)
                used = self._override_load()
                self._checked = True
                cap = np.maximum(cap - used, 1e-9 * cap)
        buf = self._moving_buffer()
        n, _ = net_rates(self.grp, self.alive, self.ovr, self.rank, self.job_w, self.share, glinks, cap, ptr,
                              members, self.intra_bps, self.rem, self.rate, buf, self._group_scratch())
        self._forget_moving()
        self._moving = buf[:n]
        self._pending = True

    def _n_fixed(self) -> int:
        """Rows with a policy rate (counted again after rows or policy rates changed)."""
        if self._fixed is None:
            self._fixed = int(self.ovr.size - np.count_nonzero(np.isnan(self.ovr)))
        return self._fixed

    def _override_load(self) -> np.ndarray:
        """Load (bytes/s) of the policy rates on every link; PolicyError naming the first link (in row
        order) that a positive rate puts over its capacity."""
        from raytestbed.network.waterfill import fixed_load  # compiled (numba)

        cap = self.capacity
        used = fixed_load(self.grp, self.ovr, self._glinks, cap.size)
        over = used - cap > 1e-9 * cap
        if over.any():
            hf = np.flatnonzero(~np.isnan(self.ovr) & (self.grp >= 0) & (self.ovr != 0))
            gl = self._glinks[self.grp[hf]]
            first = next(int(x) for x in gl.ravel() if x >= 0 and over[x])
            raise PolicyError(f"network policy rates exceed capacity of link {self.link_id(first)}")
        return used

    # ------------------------------------------------------------------ what policies read
    def table(self, job_sent: Mapping[int, float]) -> Flows:
        """The active flows as a :class:`~raytestbed.core.flows.Flows` table (cached until rows change or
        bytes move; what does not depend on the bytes, until rows change); ``job_sent``: job id -> bytes
        sent so far."""
        self.compact()
        stamp = (self.version, self._moved)
        if self._table is not None and self._table[0] == stamp:
            return self._table[1]
        first, counts, ranks = self.blocks()
        cids = [self.coflow[r][0] for r in ranks.tolist()]
        rows = (self.version, cids)
        if self._rows_table is None or self._rows_table[0] != rows:
            jids = self.jid_of_rank[ranks].tolist()
            fab = np.flatnonzero(self.grp >= 0)
            gl = self._glinks[self.grp[fab]]
            on = gl >= 0
            self._rows_table = (rows, Flows(
                flow_ids=LazyFlowIds(self.jid_of_rank[self.rank], *self._cycle_index(cids, counts), self.num),
                coflow_ids=cids, coflow_job=jids, cf=np.repeat(np.arange(first.size, dtype=np.intp), counts),
                src=self.src, dst=self.dst, remaining=self.rem, inc_flow=np.repeat(fab, on.sum(axis=1)),
                inc_link=gl[on], total=self.total, key=self.uid, owner=self, version=self.version))
        skeleton = self._rows_table[1]
        out = replace(skeleton, remaining=np.maximum(self.rem, MIN_BYTES),
                      job_sent=np.array([job_sent[j] for j in skeleton.coflow_job], dtype=float))
        self._table = (stamp, out)
        return out

    @staticmethod
    def _cycle_index(cids: list[tuple], counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row: the cycle and coflow index of its coflow (``cids``: each block's coflow id; ``counts``: rows)."""
        cyc = np.repeat(np.array([c[1] for c in cids], dtype=np.int64), counts)
        idx = np.repeat(np.array([c[2] for c in cids], dtype=np.int64), counts)
        return cyc, idx

    def coflow_infos(self) -> dict[tuple, CoflowInfo]:
        """Every active coflow as a :class:`CoflowInfo` with its flows' bytes left now (for policies
        that read ``view.coflows``); cached until rows change or bytes move."""
        self.compact()
        stamp = (self.version, self._moved)
        if self._infos is not None and self._infos[0] == stamp:
            return self._infos[1]
        first, counts, ranks = self.blocks()
        jid = self.jid_of_rank[self.rank].tolist()
        cyc, cidx = self._cycle_index([self.coflow[r][0] for r in ranks.tolist()], counts)
        cols = [cyc.tolist(), cidx.tolist(), self.num.tolist(), self.src.tolist(), self.dst.tolist(),
                self.total.tolist(), self.rem.tolist()]
        out: dict[tuple, CoflowInfo] = {}
        for r, a, c in zip(ranks.tolist(), first.tolist(), counts.tolist()):
            cid, _, started, _ = self.coflow[r]
            out[cid] = CoflowInfo(cid, cid[0], started, tuple(
                FlowInfo((jid[k], cols[0][k], cols[1][k], cols[2][k]), cols[3][k], cols[4][k], cols[5][k], cols[6][k])
                for k in range(a, a + c)))
        for r, (cid, _, started, _) in self.coflow.items():  # coflows without flows
            if cid not in out:
                out[cid] = CoflowInfo(cid, cid[0], started, ())
        self._infos = (stamp, out)
        return out
