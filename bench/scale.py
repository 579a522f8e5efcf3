"""A whole job at scale: load plus collectives, stragglers and kernel stats over 64 ranks of 54 MB.

Usage: ``PYTHONPATH=. python bench/scale.py [--ranks 64] [--events 185000] [--dir DIR] [--phases ...]``

The job: ``../shared/tools/gen_trace.py --events N`` (54 MB of Kineto JSON at 185,000 events) copied per rank,
each copy given its rank's ``distributedInfo`` and that rank's all-reduces, steps and launches from
``tests/gen_ranks.py`` (a straggler rank, clock offsets), so the cross-rank analyses have work to do.

Each phase runs in a fresh process; this driver samples the resident memory of that process and all its
children (worker processes, a Dask cluster) every 20 ms and reports the peak of the sum:

- ``eager``: ``aonkit.load(dir)`` (every rank in memory), then the analyses in this process;
- ``lazy-first``: ``aonkit.load(dir, lazy=True)`` with no caches (each rank parsed in a worker and cached),
  then the analyses through ``job.map`` in worker processes;
- ``lazy-nocache``: as ``lazy-first`` with ``write_caches=False`` (each rank parsed, summarised and let go);
- ``lazy-cached``: the same as ``lazy-first`` with the caches of the previous phase in place;
- ``dask``: as ``lazy-cached`` on a Dask ``LocalCluster`` (one single-threaded worker per core), its start apart;
- ``merge-1024``: the driver's share at 1,024 ranks: the per-rank tables of the cached job (``comm_kernels``,
  ``kernel_stats``) copied 16 times as ranks 0-1,023, then only the merge (``collectives_from_tables``,
  ``stragglers_from``, ``merge_kernel_stats``) timed, for the estimate of a 1,024-rank job.

The analyses: ``collectives`` (with ``stragglers_from``) and ``job_kernel_stats``. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT.parent / "shared" / "tools" / "gen_trace.py"
PHASES = ("eager", "lazy-nocache", "lazy-first", "lazy-cached", "dask", "merge-1024")


def make_job(out: Path, ranks: int, events: int) -> int:
    """Write ``rank{r}.pt.trace.json`` for each rank into ``out`` (kept when present); total bytes."""
    sys.path.insert(0, str(ROOT))
    from tests.gen_ranks import write_job

    stamp = out / ".job"
    want = f"{ranks} {events}"
    if stamp.exists() and stamp.read_text() == want:
        return sum(f.stat().st_size for f in out.glob("rank*.pt.trace.json"))
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base.json"
        subprocess.run([sys.executable, str(GEN), str(base), "--events", str(events)], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        text = base.read_text()
        small = Path(tmp) / "ranks"
        small.mkdir()
        write_job(small, ranks=ranks, straggler=ranks * 37 // 64, profiler_steps=True, launches=True)
        head, sep, rest = text.partition('"traceEvents": [')
        body = rest[: rest.rindex("]")].rstrip()
        for r in range(ranks):
            d = json.loads((small / f"rank{r}.json").read_text())
            extra = ",\n".join(json.dumps(_shift(e)) for e in d["traceEvents"])
            info = json.dumps(d["distributedInfo"])
            with open(out / f"rank{r}.pt.trace.json", "w") as f:
                f.write(head.replace("{", '{\n  "distributedInfo": ' + info + ",", 1))
                f.write(sep + body + ",\n" + extra + "\n]}\n")
    stamp.write_text(want)
    return sum(f.stat().st_size for f in out.glob("rank*.pt.trace.json"))


def _shift(e: dict) -> dict:
    """A ``gen_ranks`` event moved into the synthetic trace's time span, on streams and ids of its own."""
    e = dict(e, ts=round(e["ts"] + 1_700_000_000_000 - 1_000_000, 3))
    args = dict(e.get("args") or {})
    if "correlation" in args:
        args["correlation"] += 10_000_000
    if args.get("stream") == 7:
        args["stream"], e["tid"] = 27, 27
    e["args"] = args
    return e


def phase(name: str, job: Path) -> dict[str, float]:
    """Run one phase here; seconds per part."""
    import aonkit
    from aonkit.analysis.collectives import collectives, stragglers_from
    from aonkit.analysis.job_stats import job_kernel_stats

    if name == "merge-1024":
        return merge_1024(job)
    out: dict[str, float] = {}
    client = cluster = None
    t0 = time.perf_counter()
    if name == "dask":
        from dask.distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1, processes=True,
                               dashboard_address=None)  # fmt: skip
        client = Client(cluster)
        out["cluster start"] = time.perf_counter() - t0
    t = time.perf_counter()
    if name == "eager":
        ts = aonkit.load(job)
    elif name == "lazy-nocache":
        ts = aonkit.open_job(job, write_caches=False)
    else:
        ts = aonkit.open_job(job, client=client)
    out["load"] = time.perf_counter() - t
    t = time.perf_counter()
    coll, part = collectives(ts)
    strag = stragglers_from(coll, part)
    out["collectives + stragglers"] = time.perf_counter() - t
    t = time.perf_counter()
    ks = job_kernel_stats(ts)
    out["kernel stats"] = time.perf_counter() - t
    out["total"] = sum(v for k, v in out.items() if k != "cluster start")
    out["collectives"], out["top straggler"], out["kernels"] = len(coll), int(strag["rank"].iloc[0]), len(ks)
    if client is not None:
        client.close()
        cluster.close()
    return out


def merge_1024(job: Path) -> dict[str, float]:
    """Time the driver's merge of 1,024 ranks' tables (the cached job's, copied)."""
    import aonkit
    from aonkit.analysis.collectives import collectives_from_tables, comm_kernels, stragglers_from
    from aonkit.analysis.job_stats import merge_kernel_stats
    from aonkit.analysis.kernels import kernel_stats

    with aonkit.open_job(job) as ts:
        comm, ks = ts.map(comm_kernels), ts.map(kernel_stats)
    n = len(comm)
    comm_big = {r + n * k: df for k in range(1024 // n) for r, df in comm.items()}
    ks_big = {r + n * k: df for k in range(1024 // n) for r, df in ks.items()}
    t = time.perf_counter()
    coll, part = collectives_from_tables(comm_big)
    strag = stragglers_from(coll, part)
    out = {"collectives + stragglers": time.perf_counter() - t}
    t = time.perf_counter()
    kt = merge_kernel_stats(ks_big)
    out["kernel stats"] = time.perf_counter() - t
    out["total"] = out["collectives + stragglers"] + out["kernel stats"]
    out["collectives"], out["top straggler"], out["kernels"] = len(coll), int(strag["rank"].iloc[0]), len(kt)
    return out


def run_phase(name: str, job: Path) -> dict[str, float]:
    """Run a phase in a fresh process, sampling the memory of its process tree; its figures and peak RSS."""
    import psutil

    proc = subprocess.Popen([sys.executable, __file__, "--phase", name, "--dir", str(job)], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        p = psutil.Process(proc.pid)
        while not stop.is_set():
            try:
                procs = [p, *p.children(recursive=True)]
                peak = max(peak, sum(q.memory_info().rss for q in procs if q.is_running()))
            except psutil.Error:
                pass
            time.sleep(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    text, _ = proc.communicate()
    stop.set()
    th.join()
    if proc.returncode:
        raise SystemExit(f"phase {name} failed ({proc.returncode})")
    res = json.loads(text.strip().splitlines()[-1])
    res["peak RSS (GB)"] = peak / 1e9
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--events", type=int, default=185_000)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "aonkit-scale-job")
    ap.add_argument("--phases", nargs="*", default=list(PHASES), choices=PHASES)
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.phase:
        print(json.dumps(phase(a.phase, a.dir)))
        return
    t = time.perf_counter()
    size = make_job(a.dir, a.ranks, a.events)
    print(f"job: {a.ranks} ranks, {size / 1e9:.2f} GB of JSON in {a.dir} (made or checked in "
          f"{time.perf_counter() - t:.1f} s); {os.cpu_count()} cores")
    rows = []
    for name in a.phases:
        if name in ("eager", "lazy-first", "lazy-nocache"):
            for c in a.dir.glob("*.aon.*"):
                c.unlink()
        rows.append((name, run_phase(name, a.dir)))
    cols = [c for c in rows[0][1] if c not in ("collectives", "top straggler", "kernels")]
    cols += [c for _, r in rows for c in r if c not in cols and c not in ("collectives", "top straggler", "kernels")]
    print("| phase | " + " | ".join(cols) + " | collectives / top straggler / kernels |")
    print("|---" * (len(cols) + 2) + "|")
    for name, r in rows:
        cells = [f"{r[c]:.2f}" if c in r else "-" for c in cols]
        print(f"| {name} | " + " | ".join(cells) + f" | {r['collectives']} / {r['top straggler']} / {r['kernels']} |")


if __name__ == "__main__":
    main()
