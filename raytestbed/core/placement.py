"""Placements: which GPU hosts which stage replica.

A :class:`Placement` maps stage ``s``, replica ``r`` to a global GPU id (see
:mod:`raytestbed.core.cluster`). Parameter-server tasks hold no GPU and are
placed on servers (``ps_servers``). The analytic models only need the counts
x^m_{i,s} (GPUs of stage s on server m, A-SRPT §III-A), given by :meth:`counts`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from raytestbed.core.cluster import Cluster
from raytestbed.core.job import Job
from raytestbed.errors import PolicyError

Counts = dict[int, list[int]]  #: server id -> [x_s for every stage]


@dataclass(frozen=True, slots=True)
class Placement:
    """Stage replica -> GPU assignment of one job.

    Attributes:
        stage_gpus: ``stage_gpus[s][r]`` = global GPU id of replica r of stage s.
        ps_servers: servers of the PS tasks of a parameter-server job.
    """

    stage_gpus: tuple[tuple[int, ...], ...]
    ps_servers: tuple[int, ...] = ()
    _gpus: tuple[int, ...] = field(init=False, repr=False, compare=False)  #: ``gpus``, made once

    def __post_init__(self) -> None:
        object.__setattr__(self, "_gpus", tuple(g for st in self.stage_gpus for g in st))

    @property
    def gpus(self) -> tuple[int, ...]:
        """All GPUs, stage by stage."""
        return self._gpus

    def servers(self, cluster: Cluster) -> tuple[int, ...]:
        """Sorted ids of the servers hosting at least one replica."""
        return tuple(sorted({cluster.server_of(g) for g in self.gpus}))

    def counts(self, cluster: Cluster) -> Counts:
        """x^m_{i,s}: for every used server, the number of replicas of each stage on it."""
        out: Counts = {}
        n = len(self.stage_gpus)
        server_of = cluster.server_of
        for s, gpus in enumerate(self.stage_gpus):
            for g in gpus:
                m = server_of(g)
                x = out.get(m)
                if x is None:
                    x = out[m] = [0] * n
                x[s] += 1
        return out

    def gpus_per_server(self, cluster: Cluster) -> dict[int, int]:
        """Server id -> GPUs of this job on it."""
        return {m: sum(x) for m, x in self.counts(cluster).items()}

    def validate(self, job: Job, cluster: Cluster, free: Collection[int] | None = None) -> None:
        """Raise :class:`PolicyError` unless this is a valid placement of ``job``.

        Checks: one GPU per replica of every stage, GPU ids exist, no GPU used
        twice, every GPU is in ``free`` (when given), PS servers exist and match
        ``job.num_ps``.
        """
        if len(self.stage_gpus) != job.num_stages:
            raise PolicyError(
                f"job {job.job_id}: placement has {len(self.stage_gpus)} stages, job has {job.num_stages}"
            )
        for s, (gpus, st) in enumerate(zip(self.stage_gpus, job.stages)):
            if len(gpus) != st.replicas:
                raise PolicyError(
                    f"job {job.job_id}: stage {s} needs {st.replicas} GPUs, placement gives {len(gpus)}"
                )
        all_gpus = self.gpus
        if len(all_gpus) > 1 and len(set(all_gpus)) != len(all_gpus):
            raise PolicyError(f"job {job.job_id}: placement uses a GPU twice")
        total = cluster.total_gpus
        for g in all_gpus:
            if not 0 <= g < total:
                raise PolicyError(f"job {job.job_id}: GPU {g} does not exist")
            if free is not None and g not in free:
                raise PolicyError(f"job {job.job_id}: GPU {g} is not free")
        if len(self.ps_servers) != job.num_ps:
            raise PolicyError(
                f"job {job.job_id}: needs {job.num_ps} PS servers, placement gives {len(self.ps_servers)}"
            )
        for m in self.ps_servers:
            if not 0 <= m < cluster.num_servers:
                raise PolicyError(f"job {job.job_id}: PS server {m} does not exist")

    def describe(self, cluster: Cluster) -> str:
        """Compact text form, e.g. ``s0:0x2+1x1|s1:1x1`` (server x count per stage)."""
        parts = []
        for s, gpus in enumerate(self.stage_gpus):
            per: dict[int, int] = {}
            for g in gpus:
                m = cluster.server_of(g)
                per[m] = per.get(m, 0) + 1
            parts.append(f"s{s}:" + "+".join(f"{m}x{c}" for m, c in sorted(per.items())))
        if self.ps_servers:
            parts.append("ps:" + "+".join(str(m) for m in self.ps_servers))
        return "|".join(parts)

    @classmethod
    def from_counts(
        cls,
        job: Job,
        counts: Mapping[int, Sequence[int]],
        free_gpus: Mapping[int, Sequence[int]],
        ps_servers: Sequence[int] = (),
    ) -> "Placement":
        """Turn counts x^m_{i,s} into concrete GPUs, taking each server's free GPUs in order.

        Args:
            job: the job.
            counts: server -> replicas of each stage on that server.
            free_gpus: server -> its free GPU ids (ascending); must hold enough.
            ps_servers: servers of PS tasks, for PS jobs.
        """
        stage_gpus: list[list[int]] = [[] for _ in job.stages]
        for m in sorted(counts):
            x = counts[m]
            avail = list(free_gpus[m])
            need = sum(x)
            if need > len(avail):
                raise PolicyError(f"job {job.job_id}: server {m} has {len(avail)} free GPUs, needs {need}")
            i = 0
            for s, c in enumerate(x):
                stage_gpus[s].extend(avail[i : i + c])
                i += c
        return cls(tuple(tuple(g) for g in stage_gpus), tuple(ps_servers))

    @classmethod
    def fill_in_order(
        cls, job: Job, servers_gpus: Sequence[tuple[int, Sequence[int]]], ps_servers: Sequence[int] = ()
    ) -> "Placement":
        """Assign replicas stage by stage to the given GPUs, server by server.

        ``servers_gpus`` is a list of (server, GPU ids to use there); together they
        must hold exactly ``job.gpus`` GPUs. Used by simple policies (FIFO, first-fit).
        """
        flat = [g for _, gpus in servers_gpus for g in gpus]
        if len(flat) != job.gpus:
            raise PolicyError(f"job {job.job_id}: got {len(flat)} GPUs, needs {job.gpus}")
        out, i = [], 0
        for st in job.stages:
            out.append(tuple(flat[i : i + st.replicas]))
            i += st.replicas
        return cls(tuple(out), tuple(ps_servers))
