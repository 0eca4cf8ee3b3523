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

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from raytestbed.core.cluster import Cluster
from raytestbed.core.flows import MIN_BYTES, FlowRates, Flows, LazyFlowIds, LinkIndex
from raytestbed.core.job import Job
from raytestbed.core.state import CoflowInfo, FlowInfo
from raytestbed.errors import PolicyError
from raytestbed.sim import kernels

_EPS_BYTES = 1e-6  #: a flow with at most this many bytes left is complete (or 1e-12 of its size if larger)

_INT_COLS = ("uid", "rank", "num", "src", "dst", "grp")
_FLOAT_COLS = ("rem", "total", "eps", "rate", "ovr", "share", "rem0", "t0", "arate", "fin")
_COLS = _INT_COLS + _FLOAT_COLS + ("alive",)


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
        for c in _INT_COLS:
            setattr(self, c, np.zeros(0, dtype=np.int64))
        for c in _FLOAT_COLS:
            setattr(self, c, np.zeros(0))
        self.alive = np.zeros(0, dtype=bool)
        self.n_dead = 0  #: ended rows not yet compacted away
        self.live_count = np.zeros(len(order), dtype=np.int64)  #: alive flows per job rank
        self.sent_dirty = np.zeros(len(order), dtype=bool)  #: ranks whose bytes sent changed since the last sync (:meth:`take_sent`)
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
        add = sum(np.asarray(vol, dtype=float).tolist(), 0.0)
        if cur is None:
            self._seq += 1
            self.coflow[r] = (coflow_id, self._seq, now, add)
            first = 0
        else:
            self.coflow[r] = (*cur[:3], cur[3] + add)
            self.compact()
            a, b = np.searchsorted(self.rank, [r, r + 1])
            first = int(self.num[b - 1]) + 1 if b > a else 0
        return self._insert(r, src, dst, vol, first, after=True)

    def set_shares(self, jid: int, keys: np.ndarray, share: float) -> None:
        """The flows ``keys`` of job ``jid`` are members of one connection: each gets ``share`` of its rate."""
        self.compact()
        r = self.rank_of[jid]
        a, b = np.searchsorted(self.rank, [r, r + 1])
        rows = a + np.flatnonzero(np.isin(self.uid[a:b], keys))
        if np.any(self.share[rows] != share):
            self.share[rows] = share
            self.stale = True

    def _insert(self, r: int, src, dst, vol, first_num: int, after: bool) -> np.ndarray:
        """Insert flows of job rank ``r`` (numbered from ``first_num``) before or after its rows; their keys."""
        vol = np.asarray(vol, dtype=float)
        m = int(vol.size)
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        grp = np.full(m, -1, dtype=np.int64)
        fab = src != dst
        if fab.any():
            grp[fab] = self._groups_of(src[fab], dst[fab])
        eps = np.maximum(_EPS_BYTES, 1e-12 * vol)
        self._eps_max = max(self._eps_max, float(eps.max()))
        uids = np.arange(self._next_uid, self._next_uid + m, dtype=np.int64)
        new = {
            "uid": uids,
            "rank": np.full(m, r, dtype=np.int64),
            "num": np.arange(first_num, first_num + m, dtype=np.int64),
            "src": src, "dst": dst, "grp": grp,
            "rem": vol.copy(), "total": vol, "eps": eps,
            "rate": np.zeros(m), "ovr": np.full(m, np.nan), "share": np.ones(m), "alive": np.ones(m, dtype=bool),
            "rem0": vol.copy(), "t0": np.full(m, self.now), "arate": np.zeros(m), "fin": np.full(m, np.inf),
        }
        self._next_uid += m
        self.live_count[r] += m
        self._scan_all = True  # (a flow of at most its threshold's bytes ends at the next step)
        self.compact()
        pos = int(np.searchsorted(self.rank, r, side="right" if after else "left"))
        for c, arr in new.items():
            old = getattr(self, c)
            setattr(self, c, np.concatenate([old[:pos], arr, old[pos:]]))
        self._changed()
        return uids

    def _keep(self, keep: np.ndarray) -> None:
        gone = int(keep.size - np.count_nonzero(keep))
        if gone == 0:
            return
        for c in _COLS:
            setattr(self, c, getattr(self, c)[keep])
        self.n_dead = int(self.alive.size - np.count_nonzero(self.alive))
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
        a, b = np.searchsorted(self.rank, [r, r + 1])
        if b > a:
            keep = np.ones(self.rank.size, dtype=bool)
            keep[a:b] = False
            self._keep(keep)

    def detach(self, jid: int) -> dict[str, np.ndarray]:
        """Take job ``jid``'s flows out of the network as they are (a fast-forward window,
        :mod:`raytestbed.sim.fastforward`: they neither move nor take capacity until :meth:`attach`
        puts them back); its open coflow, its counts and its bytes sent stay. Returns the rows."""
        r = self.rank_of[jid]
        self.compact()
        a, b = np.searchsorted(self.rank, [r, r + 1])
        saved = {c: getattr(self, c)[a:b].copy() for c in _COLS}
        if b > a:
            keep = np.ones(self.rank.size, dtype=bool)
            keep[a:b] = False
            self._keep(keep)
        return saved

    def attach(self, jid: int, saved: dict[str, np.ndarray]) -> None:
        """Put back the rows :meth:`detach` took from job ``jid`` (same keys, bytes left and shares;
        their rates are computed again)."""
        if saved["rem"].size == 0:
            return
        r = self.rank_of[jid]
        self.compact()
        saved = dict(saved)
        m = saved["rem"].size  # anchored again now, at rate 0 until the next allocation
        saved.update(rem0=saved["rem"].copy(), t0=np.full(m, self.now), arate=np.zeros(m), rate=np.zeros(m),
                     fin=np.full(m, np.inf))
        pos = int(np.searchsorted(self.rank, r, side="left"))
        for c in _COLS:
            old = getattr(self, c)
            setattr(self, c, np.concatenate([old[:pos], saved[c], old[pos:]]))
        self._scan_all = True  # (a row may sit at its threshold)
        self._changed()

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
        self._scan_all = True
        self._moved += 1

    def take_sent(self) -> list[tuple[int, float]]:
        """[(job rank, bytes sent in its current run)] of the jobs whose count changed since the last call."""
        ranks = np.flatnonzero(self.sent_dirty)
        if ranks.size == 0:
            return []
        self.sent_dirty[ranks] = False
        # bytes of the ended flows (their sizes) plus what the flows in flight moved (size - bytes left), not the
        # running sum of rate x dt, whose rounding depends on how time was cut into steps: two jobs that sent
        # the same bytes then tie exactly, as on the emulator (emu/flowview.py), and a policy breaks the tie alike
        moving = np.where(self.alive, self.total - self.rem, 0.0)
        first, counts, rk = self.blocks()
        out = self.done.copy()
        if first.size:
            out[rk] += np.add.reduceat(moving, first)
        return list(zip(ranks.tolist(), out[ranks].tolist()))

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
        rows, free_ended = kernels.end_done(rows_in, self.rem, self.eps, self.alive, self.rank,
                                            self.sent_dirty, self.rate, self.ovr)
        self.ended = (self.rank[rows], self.uid[rows])
        if rows.size:
            self._next = None
            self.rem0[rows] = 0.0
            self.arate[rows] = 0.0
            self.fin[rows] = np.inf
        self._due_rows = np.zeros(0, np.int64)
        if rows.size == 0:
            return []
        ranks = self.rank[rows]
        for r, b in zip(ranks.tolist(), self.total[rows].tolist()):
            self.done[r] += b
        cut = np.flatnonzero(np.concatenate(([True], ranks[1:] != ranks[:-1])))
        hit = ranks[cut]
        ndone = np.diff(np.append(cut, rows.size))
        self.live_count[hit] -= ndone
        emptied = hit[self.live_count[hit] == 0].tolist()
        self.n_dead += int(rows.size)
        if self._free is not None:
            self._free -= free_ended
        if self._fixed is not None:
            self._fixed -= int(rows.size) - free_ended  # (an ended row's policy rate goes)
        if free_ended or self._free_rows():
            self.stale = True  # max-min rates change; policy rates of the other flows do not
        if self.n_dead > 1024 and 2 * self.n_dead > self.alive.size:
            self.compact()
            self._due_rows = np.zeros(0, np.int64)
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
        a, b = np.searchsorted(self.rank, [r, r + 1])
        k = a + int(np.searchsorted(self.num[a:b], num))
        return k if k < b and self.num[k] == num else None

    def reallocate(self) -> None:
        """Recompute the rates if their inputs changed: policy rates where set (checked against the
        link capacities), weighted max-min on the capacity they leave for the other flows."""
        if not self.stale:
            return
        self.stale = False
        from raytestbed.network.waterfill import link_members, net_rates  # compiled (numba): imported on first use

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
        bytes move); ``job_sent``: job id -> bytes sent so far."""
        self.compact()
        stamp = (self.version, self._moved)
        if self._table is not None and self._table[0] == stamp:
            return self._table[1]
        first, counts, ranks = self.blocks()
        jids = self.jid_of_rank[ranks].tolist()
        cf = np.repeat(np.arange(first.size, dtype=np.intp), counts)
        fab = np.flatnonzero(self.grp >= 0)
        gl = self._glinks[self.grp[fab]]
        on = gl >= 0
        inc_flow = np.repeat(fab, on.sum(axis=1))
        inc_link = gl[on]
        out = Flows(
            flow_ids=LazyFlowIds(self.jid_of_rank[self.rank], *self._cycle_index(first, counts, ranks), self.num),
            coflow_ids=[self.coflow[r][0] for r in ranks.tolist()],
            coflow_job=jids, cf=cf, src=self.src, dst=self.dst,
            remaining=np.maximum(self.rem, MIN_BYTES), inc_flow=inc_flow, inc_link=inc_link,
            total=self.total, key=self.uid, owner=self, version=self.version,
            job_sent=np.array([job_sent[j] for j in jids], dtype=float),
        )
        self._table = (stamp, out)
        return out

    def _cycle_index(self, first, counts, ranks) -> tuple[np.ndarray, np.ndarray]:
        """Per row: the cycle and coflow index of its coflow."""
        cids = [self.coflow[r][0] for r in ranks.tolist()]
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
        cyc, cidx = self._cycle_index(first, counts, ranks)
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
