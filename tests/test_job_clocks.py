"""A traced job's ranks are one clock per node, known by the node's boot id, not by its host name.

Two nodes can share a hostname (images that set one name) and the containers of one node each have their own, but
``time.time_ns`` reads the kernel's clock: one per boot. The manifest keeps each rank's boot id and the job's
clocks follow it, so the ranks of one node get one offset and two nodes never share one by name.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

import aonkit
from aonkit.analysis.collectives import clock_offsets, collectives
from aonkit.analysis.distributed import job_collectives
from aonkit.analysis.step_lags import latest_rank
from aonkit.live.paths import boot_id
from aonkit.sources.traced_job import JOB_MANIFEST, job_clocks, job_hosts, step_lag_table

from .gen_ranks import write_job

A, B = "0d6f3c1e-1111-4a5b-9c3d-000000000001", "0d6f3c1e-2222-4a5b-9c3d-000000000002"


def test_the_boot_id_is_the_kernels_and_nothing_when_there_is_none() -> None:
    path = Path("/proc/sys/kernel/random/boot_id")
    if not path.exists():
        assert boot_id() == ""
        return
    assert boot_id() == path.read_text().strip() and re.fullmatch(r"[0-9a-f-]{36}", boot_id())


def test_a_ranks_clock_is_its_boot_id_else_its_host() -> None:
    t = step_lag_table([{"rank": 0, "host": "node", "boot_id": A}, {"rank": 1, "host": "node", "boot_id": B},
                        {"rank": 2, "host": "old"}, {"rank": 3}, {"rank": 4, "boot_id": 7}])  # fmt: skip
    assert list(t.columns) == ["rank", "host", "boot_id", "boundary_lag_ms"]
    assert t["boot_id"].tolist() == [A, B, "", "", ""]  # not a string: not recorded
    assert job_hosts(t) == {0: "node", 1: "node", 2: "old"}
    assert job_clocks(t) == {0: f"boot:{A}", 1: f"boot:{B}", 2: "host:old"}  # one name, two nodes; 3, 4: unknown


def _job(tmp_path: Path, ranks: list[dict], clocks: dict[int, int]) -> Path:
    write_job(tmp_path, ranks=len(ranks), seed=3, clocks=clocks)
    (tmp_path / JOB_MANIFEST).write_text(json.dumps({"ranks": ranks, "messages": []}))
    return tmp_path


def test_two_nodes_that_share_a_hostname_are_two_clocks(tmp_path: Path) -> None:
    # GIVEN rank 0 on one node, ranks 1 and 2 on another 2.2 ms ahead (+-0.2), all three named "node"
    ranks = [{"rank": 0, "host": "node", "boot_id": A}, *({"rank": r, "host": "node", "boot_id": B} for r in (1, 2))]
    folder = _job(tmp_path, ranks, {0: 0, 1: 2_000_000, 2: 2_400_000})
    job = aonkit.load_job(folder)
    assert job.hosts == {0: "node", 1: "node", 2: "node"} and job.clocks == {0: f"boot:{A}", 1: f"boot:{B}",
                                                                             2: f"boot:{B}"}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # by name, one host: "said to share a host" (2 ms apart), kept apart
        off = clock_offsets(job)
    # THEN the second node is one clock at its ranks' median, not the first node's
    assert off.tolist() == [0, 2_200_000, 2_200_000]
    assert off.attrs["method"] == {0: "reference", 1: "collectives per host", 2: "collectives per host"}
    coll, part, _ = job_collectives(folder, processes=1)  # the parallel path reads the clocks from the folder too
    want, want_part = collectives(job)
    assert coll.equals(want) and part.equals(want_part)
    assert latest_rank(step_lag_table([{**r, "boundary_lag_ms": 2.0 * r["rank"]} for r in ranks])).clocks == 2


def test_the_containers_of_one_node_are_one_clock(tmp_path: Path) -> None:
    # GIVEN three containers of one node (their own hostnames), their collectives 0.3 ms apart at most
    ranks = [{"rank": r, "host": f"pod-{r}", "boot_id": A} for r in range(3)]
    job = aonkit.load_job(_job(tmp_path, ranks, {0: 0, 1: 300_000, 2: -200_000}))
    off = clock_offsets(job)
    # THEN they share rank 0's clock (by host name each would take its own estimate)
    assert off.tolist() == [0, 0, 0] and off.attrs["method"] == {0: "reference", 1: "same_host", 2: "same_host"}
    job.clocks = {}  # the hosts stand for the clocks: three
    assert clock_offsets(job).tolist() == [0, 300_000, -200_000]
    lags = step_lag_table([{**r, "boundary_lag_ms": 3.0 * r["rank"]} for r in ranks])
    late = latest_rank(lags)
    assert late.clocks == 1 and "clocks' offset" not in late.sentence()


def test_a_lazy_job_keeps_its_clocks_and_so_does_its_eager_copy(tmp_path: Path) -> None:
    ranks = [{"rank": 0, "host": "a", "boot_id": A}, {"rank": 1, "host": "b", "boot_id": A}]
    job = aonkit.open_job(_job(tmp_path, ranks, {0: 0, 1: 100_000}), processes=1, write_caches=False)
    assert job.clocks == {0: f"boot:{A}", 1: f"boot:{A}"} and job.eager().clocks == job.clocks


ONE_NODE = "2 rank(s) on 2 host(s) (1 node(s) by boot id: one clock each)"


@pytest.mark.parametrize(("boots", "line"), [([A, A], ONE_NODE), ([A, B], "2 rank(s) on 2 host(s)"),
                                             ([None, None], "2 rank(s) on 2 host(s)")])
def test_the_summary_counts_nodes_when_they_are_not_the_hosts(tmp_path: Path, capsys, boots, line) -> None:
    from aonkit.cli import main

    ranks = [{"rank": r, "host": f"h{r}", "boot_id": b, "boundary_lag_ms": 0.0} for r, b in enumerate(boots)]
    assert main(["summary", str(_job(tmp_path, ranks, {}))]) == 0
    assert f"job traced by aonkit trace: {line}\n" in capsys.readouterr().out
