"""Large-scale fuzzing of aonkit's JSON trace scanner, and of caches, gzip streams and job directories.

Usage: ``PYTHONPATH=. python bench/fuzz.py [--cases 100000] [--seed 1] [--procs 2] [--faults]``

With ``--faults`` the cases are those of ``tests/faults.py`` (Parquet caches
and sidecars with flipped, cut or foreign bytes, damaged gzip streams, job
directories with mixed caches, duplicates, foreign, looping and unreadable
entries), round-robin over its families, each checked by its oracle: a
correct result, a TraceFormatError/warning naming the file, or a refusal.
The CI suite runs 1,200 of them (``tests/test_faults.py``).

Without ``--faults``:
Each case takes a real trace (small files of ``../shared/traces`` and
``sample_traces/``, first 64 KiB), applies 1-8 random byte mutations (flips,
structural characters, inserts, deletes, duplicated spans, truncation) and
parses it with ``salvage`` off and on, on one thread and on three (with the
parallel threshold lowered so the speculative cuts are exercised). A case
passes when every parse returns a Trace whose event spans lie inside the buffer
or raises ``TraceFormatError``; when the stdlib ``json`` module accepts the
text, aonkit must accept it too with the same number of events. Worker
processes report progress to a watchdog that flags a hang (no progress for 60
s) and crashes (a worker dying, e.g. from an out-of-bounds read). Failing
inputs are written to ``bench/out/fuzz_failures/``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "traces"
FAIL_DIR = ROOT / "bench" / "out" / "fuzz_failures"
STRUCT = np.frombuffer(b'{}[]:,"\\ 0123456789-+.eE\ntrufalsnNI', np.uint8)


def seeds() -> list[bytes]:
    files = sorted(p for p in SHARED.rglob("*.gz") if p.stat().st_size < 150_000) if SHARED.is_dir() else []
    files += sorted((ROOT / "sample_traces").glob("*.json.gz"))
    out = []
    for p in files:
        raw = p.read_bytes()
        out.append(gzip.decompress(raw)[:65536] if raw[:2] == b"\x1f\x8b" else raw[:65536])
    return out


def mutate(data: bytes, rng: np.random.Generator) -> bytes:
    b = bytearray(data)
    for _ in range(int(rng.integers(1, 9))):
        if not b:
            break
        pos = int(rng.integers(0, len(b)))
        op = int(rng.integers(0, 6))
        if op == 0:
            b[pos] = int(rng.choice(STRUCT))
        elif op == 1:
            b[pos] = int(rng.integers(0, 256))
        elif op == 2:
            b[pos:pos] = bytes(rng.choice(STRUCT, int(rng.integers(1, 5))))
        elif op == 3:
            del b[pos : pos + int(rng.integers(1, 64))]
        elif op == 4:
            ln = int(rng.integers(1, 200))
            b[pos:pos] = b[pos : pos + ln]
        else:
            b = b[:pos]
    return bytes(b)


def check(data: bytes) -> str:
    import aonkit
    from aonkit.sources.chrome_trace import parse_buffer

    buf = np.frombuffer(data, np.uint8)
    counts = []
    for salvage in (False, True):
        for threads in (1, 3):
            try:
                t = parse_buffer(buf.copy(), path="fuzz", salvage=salvage, threads=threads)
            except aonkit.TraceFormatError as err:
                whole_document = "no 'traceEvents'" in err.reason or "no trace events" in err.reason  # not a place
                if (err.offset is None and not whole_document) or not 0 <= (err.offset or 0) <= len(data):
                    return "bad error offset"
                counts.append(("err", salvage))
                continue
            _, start, end = t._raw.spans()
            if len(t) and not bool(np.all((0 <= start) & (start < end) & (end <= len(data)))):
                return "span out of bounds"
            counts.append((len(t), salvage))
    if counts[0] != counts[1] or counts[2] != counts[3]:
        return "thread count changed the result"
    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return "ok"
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list) and not data.startswith(b"\xef\xbb\xbf"):
        expected = sum(isinstance(e, dict) for e in doc["traceEvents"])
        if counts[0] != ((expected if expected else "err"), False):  # no events: refused
            return "valid JSON parsed differently"
    return "ok"


def worker(seed: int, n: int, progress, results) -> None:
    from aonkit.sources import _parallel

    _parallel.MIN_PARALLEL_BYTES = 0
    rng = np.random.default_rng(seed)
    base = seeds()
    tally: dict[str, int] = {}
    for i in range(n):
        data = mutate(base[int(rng.integers(0, len(base)))], rng)
        outcome = check(data)
        tally[outcome] = tally.get(outcome, 0) + 1
        if outcome != "ok":
            FAIL_DIR.mkdir(parents=True, exist_ok=True)
            (FAIL_DIR / f"seed{seed}_case{i}.json").write_bytes(data)
        if i % 200 == 0:
            progress.value = i
    progress.value = n
    results.put(tally)


def fault_worker(seed: int, n: int, progress, results) -> None:
    import shutil
    import tempfile
    import traceback
    import warnings

    sys.path.insert(0, str(ROOT))
    from tests.faults import FAMILIES, run_case

    warnings.simplefilter("ignore")
    tally: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(n):
            family, case = FAMILIES[i % len(FAMILIES)], seed * 10_000_000 + i
            work = Path(tmp) / str(i)
            try:
                outcome = f"{family}:{run_case(family, case, work)}"
            except Exception as exc:  # noqa: BLE001 - every violation is recorded, the run goes on
                outcome = f"{family}:FAIL"
                FAIL_DIR.mkdir(parents=True, exist_ok=True)
                (FAIL_DIR / f"fault_{family}_{case}.txt").write_text(
                    f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc()}")
            shutil.rmtree(work, ignore_errors=True)
            tally[outcome] = tally.get(outcome, 0) + 1
            if i % 50 == 0:
                progress.value = i
    progress.value = n
    results.put(tally)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--faults", action="store_true", help="cache/gzip/job-directory fault cases (tests/faults.py)")
    a = ap.parse_args()
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    per = a.cases // a.procs
    procs, prog = [], []
    t0 = time.perf_counter()
    for k in range(a.procs):
        v = ctx.Value("q", 0)
        p = ctx.Process(target=fault_worker if a.faults else worker, args=(a.seed * 1000 + k, per, v, results))
        p.start()
        procs.append(p)
        prog.append(v)
    last, last_change, hung = -1, time.time(), False
    while any(p.is_alive() for p in procs):
        time.sleep(2)
        done = sum(v.value for v in prog)
        if done != last:
            last, last_change = done, time.time()
        elif time.time() - last_change > 60:
            hung = True
            for p in procs:
                p.kill()
            break
    total: dict[str, int] = {}
    while not results.empty():
        for k, v in results.get().items():
            total[k] = total.get(k, 0) + v
    crashed = [p.exitcode for p in procs if p.exitcode not in (0, None)]
    secs = time.perf_counter() - t0
    what = "fault cases" if a.faults else "x 4 parses (salvage off/on, 1/3 threads)"
    print(f"cases: {per * a.procs:,} {what} in {secs:.0f} s")
    print(f"outcomes: {dict(sorted(total.items()))}")
    print(f"hang: {hung}; crashed workers: {crashed}")
    bad = [k for k in total if k.endswith(":FAIL")] if a.faults else [k for k in total if k != "ok"]
    ok = not hung and not crashed and not bad
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
