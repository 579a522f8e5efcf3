"""Per-rank work across local processes and on a real Dask LocalCluster."""

from __future__ import annotations

from pathlib import Path

import pytest

import aonkit
from aonkit.analysis.collectives import collectives, stragglers
from aonkit.analysis.distributed import job_collectives, map_ranks

from .gen_ranks import write_job


def n_kernels(trace: aonkit.Trace) -> int:
    return len(trace.kernels)


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("job8")
    write_job(out, ranks=8, straggler=3, exposed_ranks=())
    return out


def test_local_processes_match_in_process(job_dir: Path) -> None:
    traces = aonkit.load(job_dir)
    assert map_ranks(n_kernels, job_dir, processes=2) == {r: len(t.kernels) for r, t in traces.items()}
    coll, part, strag = job_collectives(job_dir, processes=2)
    c2, p2 = collectives(traces)
    assert coll.equals(c2) and part.equals(p2) and strag.equals(stragglers(traces))
    assert strag.iloc[0]["rank"] == 3


def test_dask_local_cluster(job_dir: Path) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl:
        with distributed.Client(cl) as client:
            got = map_ranks(n_kernels, job_dir, client=client)
            coll, _, strag = job_collectives(job_dir, client=client)
    assert got == map_ranks(n_kernels, job_dir, processes=1)
    assert len(coll) == 6 and strag.iloc[0]["rank"] == 3
