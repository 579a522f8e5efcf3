#!/usr/bin/env python3
"""Trace-parsing benchmark: aonkit.load against stdlib json, orjson and HTA.

Usage::

    PYTHONPATH=. python bench/parse.py [--events N] [--quick] [--repeat 3]

Methods: ``aonkit.load(path)`` (default threads: one scan thread per core for
files >= 16 MB), ``aonkit.load(path, threads=1)``, aonkit on the .gz file,
stdlib json + pandas, orjson + pandas (GC off) and HTA's ``TraceAnalysis``;
plus aonkit's phase split, its Parquet cache and the issue's targets.

Every (input, method) pair runs in a fresh subprocess, so peak RSS
(``getrusage(RUSAGE_SELF).ru_maxrss``) belongs to that method alone. Each child
reports:

* ``import``: seconds to import what the method needs (``aonkit`` plus its Numba
  kernel modules; ``json``/``orjson`` plus pandas; ``hta``),
* ``first``: the first call in that process (for aonkit: loading the compiled
  kernels from Numba's on-disk cache; a warm-up child fills the cache first),
* ``cold``: wall time from spawning the process to holding the first events
  table (interpreter start + imports + first call),
* ``steady``: best of ``--repeat`` further calls in the same process,
* peak RSS after the first call, and peak RSS minus the RSS measured just
  before the first call (after the imports).

MB/s are over the uncompressed JSON size (1 MB = 10**6 bytes). Results are
printed and written as Markdown to ``bench/out/parse_results.md``.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
GEN = Path("/work/shared/tools/gen_trace.py")
SHARED = [
    Path("/work/shared/traces/hta/mtia_trace_single_rank/mtia_rank_0.json.gz"),
    Path("/work/shared/traces/hta/df_index_resolver/df_index_resolver.json.gz"),
    Path("/work/shared/traces/hta/trace_diff/control/control.json.gz"),
]
HTA_VENV_PY = OUT / "hta-venv" / "bin" / "python"  # optional side venv (see find_hta_python)
NUMBA_CACHE = OUT / "numba-cache"  # emptied at start: the first child measures JIT compilation and fills it
SNAPSHOT = OUT / "snapshot"  # copy of aonkit/ taken at start, so concurrent edits cannot mix versions
MARK = "@@BENCH_RESULT@@"
READ_PHASE = "read file / gunzip (_io.read_buffer)"
MB = 1e6

# =====================================================================================
# child side
# =====================================================================================


def _rss_now_kb() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _hwm_reset() -> bool:
    """Reset this process's VmHWM (peak RSS in /proc/self/status); False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _hwm_kb() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _maxrss_kb() -> tuple[int, int]:
    import resource

    return (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    )


def _flatten_rows(events: list) -> list[dict]:
    """What a user writes: one dict per event with the useful keys and args."""
    rows = []
    for e in events:
        if not isinstance(e, dict):
            continue
        a = e.get("args")
        if not isinstance(a, dict):
            a = {}
        rows.append(
            {
                "ph": e.get("ph"),
                "cat": e.get("cat"),
                "name": e.get("name"),
                "pid": e.get("pid"),
                "tid": e.get("tid"),
                "ts": e.get("ts"),
                "dur": e.get("dur"),
                "correlation": a.get("correlation"),
                "external_id": a.get("External id"),
                "stream": a.get("stream"),
                "device": a.get("device"),
            }
        )
    return rows


_COLS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "correlation", "external_id", "stream", "device"]


def _make_method(method: str, path: str, extra: str | None):
    """Import what ``method`` needs; return (callable -> rows, info dict)."""
    info: dict = {}
    if method in ("aonkit", "aonkit-1t", "aonkit-parquet"):
        import aonkit
        import aonkit.sources.chrome_trace  # noqa: F401  (pulls in numba + the kernels)

        threads = 1 if method == "aonkit-1t" else None  # None: one scan thread per core for files >= 16 MB

        def run():
            t = aonkit.load(path, threads=threads)
            return t, len(t.events)

        return run, info
    if method == "aonkit-warmup":
        import aonkit
        import aonkit.sources.chrome_trace  # noqa: F401

        def run():
            t = aonkit.load(path)
            return t, len(t.events)

        def finish():  # untimed: compile/load every other kernel the measured children use
            t = aonkit.load(path)
            try:
                t.save(extra)
                aonkit.load(extra)
                info["cache"] = "ok"
            except Exception as exc:  # noqa: BLE001
                info["cache"] = f"{type(exc).__name__}: {exc}"

        info["_finish"] = finish
        return run, info
    if method == "aonkit-save":
        import aonkit
        import aonkit.sources.chrome_trace  # noqa: F401

        def run():
            t = aonkit.load(path)
            t0 = time.perf_counter()
            t.save(extra)
            info.setdefault("save_s", []).append(time.perf_counter() - t0)
            return t, len(t.events)

        return run, info
    if method == "stdlib":
        import json as _json

        import pandas as pd

        def run():
            with open(path, "rb") as fh:
                doc = _json.loads(fh.read())
            events = doc["traceEvents"] if isinstance(doc, dict) else doc
            df = pd.DataFrame.from_records(_flatten_rows(events), columns=_COLS)
            return df, len(df)

        return run, info
    if method == "orjson":
        import orjson
        import pandas as pd

        def run():
            gc.disable()
            try:
                with open(path, "rb") as fh:
                    doc = orjson.loads(fh.read())
                events = doc["traceEvents"] if isinstance(doc, dict) else doc
                df = pd.DataFrame.from_records(_flatten_rows(events), columns=_COLS)
            finally:
                gc.enable()
            return df, len(df)

        return run, info
    if method == "hta":
        import logging

        logging.disable(logging.CRITICAL)
        from hta.trace_analysis import TraceAnalysis

        def run():
            ta = TraceAnalysis(trace_files={0: path}, trace_dir=os.path.dirname(path))
            return ta, len(ta.t.get_trace(0))

        return run, info
    if method == "profile":
        import aonkit.sources.chrome_trace  # noqa: F401

        return None, info
    raise SystemExit(f"unknown method {method}")


def _numba_misses() -> int | None:
    """Numba compilations (cache misses) of the scanner in this process, if observable."""
    try:
        from numba.core.registry import CPUDispatcher

        from aonkit._kernels import json_fast, json_lex, symbols, trace_event, trace_scan

        mods = (json_fast, json_lex, symbols, trace_event, trace_scan)
        disp = {id(f): f for m in mods for f in vars(m).values() if isinstance(f, CPUDispatcher)}
        return int(sum(sum(f.stats.cache_misses.values()) for f in disp.values()))
    except Exception:  # noqa: BLE001
        return None


def _profile(path: str, repeat: int) -> dict:
    """Best-of-``repeat`` times of aonkit's reader phases, through its current functions."""
    import aonkit
    from aonkit.sources import _io, _parallel
    from aonkit.sources.chrome_trace import parse_buffer

    buf, _ = _io.read_buffer(path)
    assert buf.flags.writeable and buf.flags.c_contiguous  # what the kernels are compiled for
    n_threads = _parallel.default_threads(buf.shape[0])
    steps = [
        (READ_PHASE, lambda: _io.read_buffer(path)),
        ("scan, 1 thread (_parallel.sequential)", lambda: _parallel.sequential(buf)),
        (f"scan, default threads = {n_threads} (_parallel.scan)", lambda: _parallel.scan(buf)),
        ("parse_buffer(buf, threads=1)", lambda: parse_buffer(buf, threads=1)),
        ("parse_buffer(buf) (default threads)", lambda: parse_buffer(buf)),
        ("aonkit.load(path, threads=1)", lambda: aonkit.load(path, threads=1)),
        ("aonkit.load(path)", lambda: aonkit.load(path)),
    ]
    parse_buffer(buf)  # load every kernel before timing
    phases: dict = {}
    for _ in range(repeat):
        for name, fn in steps:
            gc.collect()
            t0 = time.perf_counter()
            r = fn()
            phases.setdefault(name, []).append(time.perf_counter() - t0)
            del r
    out = {k: min(v) for k, v in phases.items()}
    seq = _parallel.sequential(buf)
    out["_n_events"], out["_n_symbols"], out["_threads"] = int(seq.n_ev), int(seq.nsym), n_threads
    out["_whole"] = out["aonkit.load(path)"]
    return out


def child_main(a: argparse.Namespace) -> None:
    spawn_wall = a.spawn_wall
    t0 = time.perf_counter()
    run, info = _make_method(a.child, a.path, a.extra)
    t_import = time.perf_counter() - t0
    gc.collect()
    rss_before = _rss_now_kb()
    out: dict = {"import_s": t_import, "rss_before_kb": rss_before}
    if a.child == "profile":
        out["profile"] = _profile(a.path, a.repeat)
        print(MARK + json.dumps(out), flush=True)
        return
    misses0 = _numba_misses() if a.child.startswith("aonkit") else None
    t0 = time.perf_counter()
    obj, n = run()
    out["first_s"] = time.perf_counter() - t0
    out["cold_s"] = time.time() - spawn_wall if spawn_wall else None
    gc.collect()
    out["retained_kb"] = _rss_now_kb() - rss_before  # RSS still held while the result is alive
    self_kb, child_kb = _maxrss_kb()
    out.update(rows=n, maxrss_self_kb=self_kb, maxrss_children_kb=child_kb)
    if misses0 is not None:
        m = _numba_misses()
        out["numba_compiles_first"] = None if m is None else m - misses0
    del obj
    gc.collect()
    steady: list[float] = []
    budget_t0 = time.perf_counter()
    steady_delta: list[int] = []
    steady_retained: list[int] = []
    for i in range(a.repeat):
        if i >= 1 and time.perf_counter() - budget_t0 > a.steady_budget:
            break
        before = _rss_now_kb()
        can_reset = _hwm_reset()
        t0 = time.perf_counter()
        obj, n2 = run()
        steady.append(time.perf_counter() - t0)
        if can_reset:
            steady_delta.append(_hwm_kb() - before)
        gc.collect()
        steady_retained.append(_rss_now_kb() - before)
        del obj
        gc.collect()
    out["steady_s"] = steady
    out["steady_delta_kb"] = steady_delta
    out["steady_retained_kb"] = steady_retained
    out["maxrss_self_end_kb"], out["maxrss_children_end_kb"] = _maxrss_kb()
    finish = info.pop("_finish", None)
    if finish:
        finish()
    out["info"] = info
    print(MARK + json.dumps(out), flush=True)


# =====================================================================================
# parent side
# =====================================================================================


def find_hta_python() -> str | None:
    """A Python that can ``import hta``: this one, else bench/out/hta-venv."""
    for py in (sys.executable, str(HTA_VENV_PY)):
        if not Path(py).exists():
            continue
        r = subprocess.run([py, "-c", "import hta.trace_analysis"], capture_output=True, text=True)
        if r.returncode == 0:
            return py
    return None


def cpu_busy_s() -> tuple[float, float]:
    """(CPU-seconds busy on the whole machine, CPU-seconds of this process's reaped children)."""
    import resource

    try:
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        busy = (sum(f[:8]) - f[3] - f[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait
    except (OSError, ValueError, IndexError):
        busy = float("nan")
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return busy, r.ru_utime + r.ru_stime


def spawn(
    method: str,
    path: Path,
    args,
    *,
    python: str | None = None,
    extra: str | None = None,
    env_extra: dict | None = None,
    timeout: float = 900,
) -> dict:
    env = dict(os.environ)
    src_root = str(ROOT) if args.live else str(SNAPSHOT)
    env["PYTHONPATH"] = src_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["NUMBA_CACHE_DIR"] = str(NUMBA_CACHE)
    # the Numba parser, always: while it is not yet in the cache a load would use the quick first-run reader
    # (aonkit.sources.first_run), and the background compile it starts would run beside the measurement
    env["AONKIT_QUICK_PARSE"] = "0"
    env["AONKIT_BACKGROUND_COMPILE"] = "0"
    if env_extra:
        env.update(env_extra)
    cmd = [
        python or sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        method,
        "--path",
        str(path),
        "--repeat",
        str(args.repeat),
        "--steady-budget",
        str(args.steady_budget),
        "--spawn-wall",
        repr(time.time()),
    ]
    if extra:
        cmd += ["--extra", extra]
    busy0, own0 = cpu_busy_s()
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=OUT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    busy1, own1 = cpu_busy_s()
    for line in r.stdout.splitlines():
        if line.startswith(MARK):
            res = json.loads(line[len(MARK) :])
            res["wall_s"] = wall
            # CPUs kept busy by other processes while this child ran (machine busy time minus the child's)
            res["others_cpus"] = max(0.0, (busy1 - busy0) - (own1 - own0)) / wall if wall > 0 else None
            return res
    tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
    return {"error": f"rc={r.returncode}: " + " | ".join(tail)}


def run_gen(path: Path, n: int) -> None:
    if path.exists() and path.stat().st_size > 0:
        print(f"  reusing {path.relative_to(ROOT)}")
        return
    tmp = path.with_suffix(".tmp")
    subprocess.run([sys.executable, str(GEN), str(tmp), "--events", str(n)], check=True)
    tmp.rename(path)


def gzip_file(src: Path, dst: Path) -> None:
    if dst.exists() and dst.stat().st_size > 0:
        print(f"  reusing {dst.relative_to(ROOT)}")
        return
    tmp = dst.with_suffix(".tmp")
    with open(src, "rb") as fi, gzip.open(tmp, "wb", compresslevel=6) as fo:
        shutil.copyfileobj(fi, fo, 1 << 22)
    tmp.rename(dst)


def gunzip_file(src: Path, dst: Path) -> None:
    if dst.exists() and dst.stat().st_size > 0:
        print(f"  reusing {dst.relative_to(ROOT)}")
        return
    tmp = dst.with_suffix(".tmp")
    with gzip.open(src, "rb") as fi, open(tmp, "wb") as fo:
        shutil.copyfileobj(fi, fo, 1 << 22)
    tmp.rename(dst)


def _mb(kb: int | None) -> float | None:
    return None if kb is None else kb * 1024 / MB


def summarize(res: dict, size: int) -> dict:
    """Derived figures of one child's result."""
    if "error" in res:
        return {"error": res["error"]}
    steady = min(res["steady_s"]) if res.get("steady_s") else None
    peak_kb = max(res["maxrss_self_kb"], res.get("maxrss_children_kb") or 0)
    peak = _mb(peak_kb)
    delta = _mb(res["maxrss_self_kb"] - res["rss_before_kb"])
    return {
        "rows": res["rows"],
        "import": res["import_s"],
        "first": res["first_s"],
        "cold": res.get("cold_s"),
        "steady": steady,
        "n_steady": len(res.get("steady_s") or []),
        "mbps": size / MB / steady if steady else None,
        "mbps_first": size / MB / res["first_s"],
        "peak": peak,
        "delta": delta,
        "peak_ratio": peak * MB / size if size else None,
        "retained": _mb(max(res["steady_retained_kb"]) if res.get("steady_retained_kb") else res.get("retained_kb")),
        "delta_steady": _mb(max(res["steady_delta_kb"])) if res.get("steady_delta_kb") else None,
        "delta_ratio": delta * MB / size if size else None,
        "forked_child_peak": _mb(res.get("maxrss_children_kb")) if res.get("maxrss_children_kb") else None,
        "compiles": res.get("numba_compiles_first"),
        "info": res.get("info", {}),
        "wall": res.get("wall_s"),
        "others": res.get("others_cpus"),
    }


def fmt(v, spec=".2f", none="-"):
    if v is None:
        return none
    if isinstance(v, str):
        return v
    return format(v, spec)


def render(headers: list[str], rows: list[list[str]], md: bool) -> str:
    if md:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    sep = "  "
    out = [sep.join(h.ljust(w) for h, w in zip(headers, widths)), sep.join("-" * w for w in widths)]
    for r in rows:
        out.append(sep.join(c.rjust(w) if i >= 2 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(out)


def machine_facts(hta_py: str | None = None) -> list[str]:
    facts = []
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
        keep = ("Model name", "CPU(s):", "Thread(s) per core", "Core(s) per socket", "L2 cache", "L3 cache")
        facts += [" ".join(line.split()) for line in lscpu if line.startswith(keep)]
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as fh:
            facts.append(" ".join(fh.readline().split()))
    except OSError:
        pass
    facts.append(f"python {platform.python_version()} ({platform.platform()})")
    for mod in ("numba", "numpy", "pandas", "orjson", "pyarrow", "isal"):
        try:
            m = __import__(mod)
            facts.append(f"{mod} {m.__version__}")
        except Exception as exc:  # noqa: BLE001
            facts.append(f"{mod}: {type(exc).__name__}")
    if hta_py:
        r = subprocess.run(
            [
                hta_py,
                "-c",
                "import importlib.metadata as m, sys; "
                "print(m.version('HolisticTraceAnalysis'), sys.version.split()[0])",
            ],
            capture_output=True,
            text=True,
        )
        facts.append(f"HTA (HolisticTraceAnalysis) {' on python '.join(r.stdout.split()) or '?'} via {hta_py}")
    return facts


def aonkit_fingerprint(root: Path) -> str:
    """Sizes/mtimes of aonkit's sources under ``root``, to notice edits made while the benchmark runs."""
    parts = []
    for p in sorted((root / "aonkit").rglob("*.py")):
        st = p.stat()
        parts.append(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}")
    return "\n".join(parts)


def source_hash(root: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    for p in sorted((root / "aonkit").rglob("*.py")):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


def take_snapshot() -> None:
    """Copy aonkit/ (sources only) to bench/out/snapshot; mtimes kept so Numba's cache stays valid."""
    if SNAPSHOT.exists():
        shutil.rmtree(SNAPSHOT)
    shutil.copytree(
        ROOT / "aonkit", SNAPSHOT / "aonkit", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
    )


def git_head() -> str:
    r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "aonkit"], capture_output=True, text=True
    ).stdout.strip()
    return r.stdout.strip() + (" + uncommitted aonkit/ changes" if dirty else "")


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--events", type=int, default=None, help="synthetic trace size (default 1,000,000; 100,000 with --quick)"
    )
    ap.add_argument("--quick", action="store_true", help="100k events and one shared trace")
    ap.add_argument("--repeat", type=int, default=3, help="steady-state calls per child (best is reported)")
    ap.add_argument(
        "--steady-budget",
        type=float,
        default=60.0,
        help="stop the steady-state repeats of a child once they have taken this many seconds (>=1 run)",
    )
    ap.add_argument("--no-hta", action="store_true")
    ap.add_argument(
        "--keep-jit-cache",
        action="store_true",
        help="keep bench/out/numba-cache instead of measuring a compile from scratch",
    )
    ap.add_argument(
        "--live", action="store_true", help="import aonkit from the working tree instead of a snapshot copied at start"
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--extra", help=argparse.SUPPRESS)
    ap.add_argument("--spawn-wall", type=float, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child_main(a)
        return

    t_start = time.perf_counter()
    n_events = a.events or (100_000 if a.quick else 1_000_000)
    OUT.mkdir(parents=True, exist_ok=True)
    if NUMBA_CACHE.exists() and not a.keep_jit_cache:
        shutil.rmtree(NUMBA_CACHE)  # the first child then measures the JIT compile from scratch
    NUMBA_CACHE.mkdir(exist_ok=True)
    fp0 = aonkit_fingerprint(ROOT)
    if not a.live:
        take_snapshot()
    src_root = ROOT if a.live else SNAPSHOT
    src_id = source_hash(src_root)
    load0 = loadavg()
    print(f"aonkit under test: {src_root / 'aonkit'} (sources sha256 {src_id})")

    # ---------------------------------------------------------------- inputs
    print("== preparing inputs")
    synth = OUT / f"synthetic_{n_events}.json"
    run_gen(synth, n_events)
    synth_gz = OUT / f"synthetic_{n_events}.json.gz"
    gzip_file(synth, synth_gz)
    inputs = [{"name": f"synthetic {n_events:,}", "json": synth, "gz": synth_gz, "gz_given": False}]
    for src in SHARED[:1] if a.quick else SHARED:
        if not src.exists():
            print(f"  missing {src}, skipped")
            continue
        dst = OUT / src.name[: -len(".gz")]
        gunzip_file(src, dst)
        inputs.append({"name": src.name, "json": dst, "gz": src, "gz_given": True})
    for inp in inputs:
        inp["size"] = inp["json"].stat().st_size
        inp["gz_size"] = inp["gz"].stat().st_size
        print(f"  {inp['name']}: {inp['size'] / MB:.1f} MB JSON, {inp['gz_size'] / MB:.1f} MB gzip")

    hta_py = None if a.no_hta else find_hta_python()
    if hta_py is None and not a.no_hta:
        print("HTA not installed")
    elif hta_py:
        print(f"  HTA via {hta_py}")

    # ---------------------------------------------------------------- warm-up = JIT compile
    print(
        "== aonkit warm-up child"
        + (
            ""
            if a.keep_jit_cache
            else " with an EMPTY Numba cache (measures the JIT compile; fills the cache for the rest)"
        )
    )
    warm_pq = OUT / "cache" / "warmup.aon.parquet"
    warm_pq.parent.mkdir(exist_ok=True)
    r = spawn(
        "aonkit-warmup",
        inputs[0]["json"],
        argparse.Namespace(repeat=1, steady_budget=0, live=a.live),
        extra=str(warm_pq),
        timeout=1200,
    )
    if "error" in r:
        raise SystemExit(f"aonkit warm-up failed: {r['error']}")
    compile_cold = summarize(r, inputs[0]["size"])
    print(
        f"  first call {compile_cold['first']:.2f} s (cold process {compile_cold['cold']:.2f} s), "
        f"then {compile_cold['steady']:.2f} s; numba compiles: {compile_cold['compiles']}; "
        f"save/parquet warm-up: {compile_cold['info'].get('cache')}"
    )

    # ---------------------------------------------------------------- measurements
    results: dict[tuple[str, str], dict] = {}
    profiles: dict[str, dict] = {}
    cache_res: dict[str, dict] = {}
    methods = [
        ("aonkit", "json"),
        ("aonkit 1 thread", "json"),
        ("aonkit .gz", "gz"),
        ("stdlib json", "json"),
        ("orjson", "json"),
    ]
    if hta_py:
        methods.append(("HTA 0.5 TraceAnalysis", "json"))
    child_of = {
        "aonkit": "aonkit",
        "aonkit 1 thread": "aonkit-1t",
        "aonkit .gz": "aonkit",
        "stdlib json": "stdlib",
        "orjson": "orjson",
        "HTA 0.5 TraceAnalysis": "hta",
    }
    ours = ("aonkit", "aonkit 1 thread")
    for inp in inputs:
        print(f"== {inp['name']}")
        for label, src in methods:
            path = inp[src]
            py = hta_py if child_of[label] == "hta" else None
            r = spawn(child_of[label], path, a, python=py)
            s = summarize(r, inp["size"])
            results[(inp["name"], label)] = s
            if "error" in s:
                print(f"  {label:24s} ERROR {s['error']}")
            else:
                print(
                    f"  {label:24s} first {s['first']:7.2f} s  steady {fmt(s['steady'], '7.2f')} s "
                    f"({s['n_steady']}x)  peak {s['peak']:8.0f} MB  Δ {s['delta']:8.0f} MB  rows {s['rows']:,}"
                )
        # phase profile, json and gz
        for src in ("json", "gz"):
            p = spawn("profile", inp[src], a)
            profiles[(inp["name"], src)] = p.get("profile", {"error": p.get("error")})
        # parquet cache
        pq_path = OUT / "cache" / (inp["json"].stem + ".aon.parquet")
        pq_path.parent.mkdir(exist_ok=True)
        for f in (pq_path, pq_path.with_suffix(".meta.json")):
            f.unlink(missing_ok=True)
        r = spawn(
            "aonkit-save", inp["json"], argparse.Namespace(repeat=1, steady_budget=0, live=a.live), extra=str(pq_path)
        )
        if "error" in r:
            cache_res[inp["name"]] = {"error": r["error"]}
            print("  cache: not available (" + r["error"] + ")")
            continue
        save_s = min(r["info"].get("save_s") or [float("nan")])
        r2 = spawn("aonkit-parquet", pq_path, a)
        s2 = summarize(r2, inp["size"])
        s2["save"] = save_s
        s2["pq_size"] = pq_path.stat().st_size + pq_path.with_suffix(".meta.json").stat().st_size
        cache_res[inp["name"]] = s2
        if "error" in s2:
            print("  cache: load failed (" + s2["error"] + ")")
        else:
            print(
                f"  cache: save {save_s:.2f} s, load first {s2['first']:.2f} s steady {fmt(s2['steady'])} s, "
                f"{s2['pq_size'] / MB:.1f} MB on disk"
            )

    fp1 = aonkit_fingerprint(ROOT)
    load1 = loadavg()
    total = time.perf_counter() - t_start

    # ---------------------------------------------------------------- report
    def ratio(x, y, spec=".1f"):
        return f"{x / y:{spec}}x" if x and y else "-"

    def main_table(md: bool) -> str:
        headers = [
            "input (JSON MB)",
            "method",
            "rows",
            "first s",
            "steady s (n)",
            "MB/s",
            "peak RSS MB",
            "ΔRSS MB",
            "peak/size",
            "Δ/size",
            "aonkit speed-up: default, 1 thread (steady)",
            "RSS method/aonkit (peak, Δ)",
        ]
        rows = []
        for inp in inputs:
            base = results.get((inp["name"], "aonkit"), {})
            base1 = results.get((inp["name"], "aonkit 1 thread"), {})
            for label, src in methods:
                s = results[(inp["name"], label)]
                name = f"{inp['name']} ({inp['size'] / MB:.1f})"
                if "error" in s:
                    rows.append([name, label, "ERROR: " + s["error"][:60]] + [""] * (len(headers) - 3))
                    continue
                sp = rss = "-"
                if label not in (*ours, "aonkit .gz"):
                    sp = f"{ratio(s['steady'], base.get('steady'))}, {ratio(s['steady'], base1.get('steady'))}"
                    rss = f"{ratio(s['peak'], base.get('peak'))}, {ratio(s['delta'], base.get('delta'))}"
                peak = fmt(s["peak"], ".0f")
                if s.get("forked_child_peak") and s["forked_child_peak"] >= s["peak"] - 1e-9:
                    peak += "*"
                rows.append(
                    [
                        name,
                        label + (" (gz input)" if src == "gz" else ""),
                        f"{s['rows']:,}",
                        fmt(s["first"]),
                        f"{fmt(s['steady'])} ({s['n_steady']})",
                        fmt(s["mbps"], ".0f"),
                        peak,
                        fmt(s["delta"], ".0f"),
                        fmt(s["peak_ratio"]),
                        fmt(s["delta_ratio"]),
                        sp,
                        rss,
                    ]
                )
        return render(headers, rows, md)

    def detail_table(md: bool) -> str:
        headers = [
            "input",
            "method",
            "import s",
            "cold s",
            "aonkit speed-up: default, 1 thread (cold)",
            "ΔRSS steady MB",
            "retained MB",
            "other load (CPUs)",
        ]
        rows = []
        for inp in inputs:
            base = results.get((inp["name"], "aonkit"), {})
            base1 = results.get((inp["name"], "aonkit 1 thread"), {})
            for label, _src in methods:
                s = results[(inp["name"], label)]
                if "error" in s:
                    continue
                sp = "-"
                if label not in (*ours, "aonkit .gz"):
                    sp = f"{ratio(s.get('cold'), base.get('cold'))}, {ratio(s.get('cold'), base1.get('cold'))}"
                rows.append(
                    [
                        inp["name"],
                        label,
                        fmt(s["import"]),
                        fmt(s["cold"]),
                        sp,
                        fmt(s.get("delta_steady"), ".0f"),
                        fmt(s.get("retained"), ".0f"),
                        fmt(s.get("others")),
                    ]
                )
        return render(headers, rows, md)

    def extra_table(md: bool) -> str:
        headers = [
            "input",
            "JSON MB",
            "gz MB",
            "aonkit .json steady s",
            "aonkit .gz steady s",
            "gunzip s (read_buffer)",
            "save .parquet s",
            "parquet+sidecar MB",
            "load .parquet first s",
            "load .parquet steady s",
            "parquet vs JSON load",
            "parquet peak RSS MB",
        ]
        rows = []
        for inp in inputs:
            pj = results[(inp["name"], "aonkit")]
            pg = results[(inp["name"], "aonkit .gz")]
            prof_gz = profiles.get((inp["name"], "gz"), {})
            c = cache_res.get(inp["name"], {})
            if "error" in c:
                cache_cols = ["cache: not available"] + ["-"] * 5
            else:
                cache_cols = [
                    fmt(c.get("save")),
                    fmt(c.get("pq_size", 0) / MB, ".1f"),
                    fmt(c.get("first")),
                    fmt(c.get("steady")),
                    ratio(pj.get("steady"), c.get("steady")) + " faster",
                    fmt(c.get("peak"), ".0f"),
                ]
            rows.append(
                [
                    inp["name"],
                    f"{inp['size'] / MB:.1f}",
                    f"{inp['gz_size'] / MB:.1f}",
                    fmt(pj.get("steady")),
                    fmt(pg.get("steady")),
                    fmt(prof_gz.get(READ_PHASE), ".3f"),
                ]
                + cache_cols
            )
        return render(headers, rows, md)

    def profile_table(md: bool) -> str:
        keys = []
        for p in profiles.values():
            for k in p:
                if not k.startswith("_") and k != "error" and k not in keys:
                    keys.append(k)
        headers = ["phase (best of %d, in one process)" % a.repeat]
        cols = []
        for inp in inputs:
            headers.append(f"{inp['name']} s (% of aonkit.load)")
            cols.append((profiles.get((inp["name"], "json"), {}), profiles.get((inp["name"], "gz"), {})))
        rows = []

        def cell(p, k):
            v, tot = p.get(k), p.get("_whole")
            return "-" if v is None else (f"{v:.3f} ({100 * v / tot:.0f}%)" if tot else f"{v:.3f}")

        for k in keys:
            rows.append([k] + [cell(pj, k) for pj, _ in cols])
        for k in (READ_PHASE, "aonkit.load(path)"):
            rows.append([f"{k}, .gz input"] + [cell({**pg, "_whole": pj.get("_whole")}, k) for pj, pg in cols])
        rows.append(
            ["events / symbols interned"]
            + [f"{pj.get('_n_events', 0):,} / {pj.get('_n_symbols', 0):,}" for pj, _ in cols]
        )
        return render(headers, rows, md)

    def compile_lines() -> list[str]:
        c = compile_cold
        how = "cache kept (--keep-jit-cache)" if a.keep_jit_cache else "EMPTY Numba cache (bench/out/numba-cache wiped)"
        out = [
            f"{how}, {inputs[0]['name']}: first aonkit.load "
            f"{c['first']:.1f} s (process spawn -> table {fmt(c['cold'], '.1f')} s, imports {c['import']:.2f} s), "
            f"{c['compiles']} Numba compilations; the next call took {fmt(c['steady'])} s (first - next: "
            f"{c['first'] - (c['steady'] or 0):.1f} s)."
            if c.get("first") is not None
            else "empty-cache run: " + str(c)
        ]
        for inp in inputs:
            for label in ours:
                s = results.get((inp["name"], label), {})
                if "error" in s or not s:
                    continue
                out.append(
                    f"warm cache, {inp['name']}, {label}: imports {s['import']:.2f} s, first call "
                    f"{s['first']:.2f} s vs steady {fmt(s['steady'])} s (first - steady "
                    f"{s['first'] - (s['steady'] or 0):+.2f} s), spawn -> table {fmt(s['cold'])} s, "
                    f"Numba compilations in the first call: {s['compiles']}"
                )
        return out

    def target_lines() -> list[str]:
        """The issue's targets, checked on the .json inputs with the numbers measured above."""
        out = []

        def verdict(vals: list[bool]) -> str:
            if not vals:
                return "NOT MEASURED"
            return "MET" if all(vals) else ("NOT MET" if not any(vals) else f"MET on {sum(vals)}/{len(vals)} inputs")

        def get(inp, label, key):
            s = results.get((inp["name"], label), {})
            return None if "error" in s else s.get(key)

        for label in ours:
            # 1. throughput >= 5x orjson + pandas (gc off)
            parts, ok = [], []
            for inp in inputs:
                o, k = get(inp, "orjson", "steady"), get(inp, label, "steady")
                if o and k:
                    ok.append(o / k >= 5)
                    parts.append(f"{inp['name']} {o / k:.1f}x")
            out.append(f"[{label}] >= 5x orjson+pandas (GC off) throughput: {verdict(ok)} ({'; '.join(parts)})")
            # 3. >= 20x faster than HTA
            parts, ok = [], []
            for inp in inputs:
                h, k = get(inp, "HTA 0.5 TraceAnalysis", "steady"), get(inp, label, "steady")
                if h and k:
                    ok.append(h / k >= 20)
                    parts.append(f"{inp['name']} {h / k:.1f}x")
            out.append(
                f"[{label}] >= 20x faster than HTA TraceAnalysis load (steady): {verdict(ok)} ({'; '.join(parts)})"
            )
            # 4. peak RSS <= 2x file size
            for key, what in (("peak_ratio", "absolute peak RSS"), ("delta_ratio", "peak RSS minus RSS after imports")):
                parts, ok = [], []
                for inp in inputs:
                    r = get(inp, label, key)
                    if r is not None:
                        ok.append(r <= 2)
                        parts.append(f"{inp['name']} {r:.2f}x")
                out.append(f"[{label}] {what} <= 2x JSON size: {verdict(ok)} ({'; '.join(parts)})")
        # 2. >= 340 MB/s on one core
        parts, ok = [], []
        for inp in inputs:
            m = get(inp, "aonkit 1 thread", "mbps")
            if m:
                ok.append(m >= 340)
                parts.append(f"{inp['name']} {m:.1f} MB/s")
        out.append(f"[aonkit 1 thread] >= 340 MB/s on one core (steady): {verdict(ok)} ({'; '.join(parts)})")
        return out

    notes = [
        "first = first call in a fresh process (Numba kernels loaded from the warm on-disk cache); "
        "cold = process spawn -> first events table (interpreter + imports + first call); "
        f"steady = best of up to {a.repeat} further calls in the same process (n = calls made; "
        f"repeats stop after {a.steady_budget:.0f} s).",
        "MB/s over the uncompressed JSON size (steady). peak RSS = ru_maxrss after the first call; "
        "ΔRSS = that peak minus VmRSS just before the first call (after imports). ΔRSS steady = peak "
        "(VmHWM, reset through /proc/self/clear_refs) minus VmRSS before the call, for the later calls: "
        "parse memory without one-off costs such as loading compiled kernels. retained = VmRSS while the "
        "result of a later call is still alive minus VmRSS before that call (what keeping the table costs). "
        "other load = CPU-seconds the machine spent busy outside the child while it ran, per second "
        f"(0 = quiet; {os.cpu_count()} = every CPU taken by other processes).",
        "speed-up = method time / aonkit time on the same .json file, for aonkit with default threads "
        f"(the scan uses one thread per core, {os.cpu_count()} here, for files >= 16 MB) and with threads=1; "
        "RSS ratio = method / aonkit (default threads).",
        "stdlib/orjson: read bytes, loads(), flatten ph,cat,name,pid,tid,ts,dur + args correlation/External id/"
        "stream/device into a list of dicts, pd.DataFrame.from_records (orjson with gc disabled).",
    ]
    if hta_py:
        notes.append(
            "HTA: TraceAnalysis(trace_files={0: path}, trace_dir=dir) with its defaults: it parses in a "
            "forked multiprocessing worker, so its peak is max(parent, worker) ru_maxrss (marked *) and "
            "ΔRSS covers the parent only. It keeps fewer rows: it drops events without dur or cat "
            "(flows, instants, metadata) and cat == 'Trace'."
        )
    recompiled = [f"{k[0]} / {k[1]}" for k, v in results.items() if v.get("compiles")]
    if recompiled:
        notes.append("WARNING: Numba compiled during the first call of: " + "; ".join(recompiled))
    if a.live and fp0 != fp1:
        notes.append("WARNING: aonkit's sources changed while the benchmark ran; results may mix versions.")
    elif fp0 != fp1:
        notes.append(
            "aonkit/ in the working tree changed during the run; the benchmark used the snapshot "
            "taken at start throughout."
        )
    notes.append(
        f"aonkit measured: {'working tree' if a.live else 'snapshot of the working tree at start'} "
        f"(sources sha256 {src_id}); git HEAD {git_head()}."
    )
    notes.append(
        f"load average (1/5/15 min) at start {load0}, at end {load1}: other processes on this "
        f"{os.cpu_count()}-CPU box (e.g. a concurrent test run) slow every method."
    )
    notes.append(f"total benchmark time {total / 60:.1f} min")
    facts = [time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), *machine_facts(hta_py)]
    targets = target_lines()
    compiles = compile_lines()

    print()
    print("== machine")
    print("\n".join("  " + f for f in facts))
    print()
    print("== parse results")
    print(main_table(False))
    print()
    print("== details (imports, cold process, steady-state memory)")
    print(detail_table(False))
    print()
    print("== aonkit gzip and Parquet cache")
    print(extra_table(False))
    print()
    print("== aonkit phase split (aonkit's own functions; % of a whole default aonkit.load in the same process)")
    print(profile_table(False))
    print()
    print("== first call / JIT compile")
    print("\n".join("  " + x for x in compiles))
    print()
    print("== targets (steady-state times, .json inputs)")
    print("\n".join("  " + x for x in targets))
    print()
    print("\n".join("* " + n for n in notes))

    md = [
        "# aonkit parse benchmark",
        "",
        "`" + " ".join(["PYTHONPATH=. python bench/parse.py", *sys.argv[1:]]) + "`",
        "",
        "## Machine",
        "",
        *("- " + f for f in facts),
        "",
        "## Parse results",
        "",
        main_table(True),
        "",
        "## Details",
        "",
        detail_table(True),
        "",
        "## aonkit gzip and Parquet cache",
        "",
        extra_table(True),
        "",
        "## aonkit phase split",
        "",
        profile_table(True),
        "",
        "## First call / JIT compile",
        "",
        *("- " + x for x in compiles),
        "",
        "## Targets",
        "",
        *("- " + x for x in targets),
        "",
        "## Notes",
        "",
        *("- " + n for n in notes),
        "",
    ]
    (OUT / "parse_results.md").write_text("\n".join(md))
    print(f"\nwrote {(OUT / 'parse_results.md').relative_to(ROOT)}")


if __name__ == "__main__":
    main()
