"""What the always-on daemon costs, and what readers and on-demand traces see.

Usage: ``PYTHONPATH=. python bench/daemon.py [--seconds 60] [--readers 10] [--trace-steps 20] [--gpus clib,fake,real]``

(a) the daemon at 10 Hz with the host and 8 simulated GPUs, and with the host only, flushing every 30 s: CPU % of
one core in steady state (``/proc/<pid>/stat``, utime + stime over ``--seconds`` from its first flush, which
imports pyarrow), the flusher's CPU for its last flush, the CPU seconds it took until the first, and RSS;
(b) Parquet bytes per GPU-hour, extrapolated from the files of the run (the host's 3 channels included; fake
values may compress differently from real ones);
(c) reader latency, sample time stamp to long-form table, one reader polling every 1 ms; (d) the same with
``--readers`` readers at once, each polling every 10 ms, and the daemon's CPU meanwhile; (e) an on-demand trace
of a torch CPU training loop: time from the request to the first profiled step, and the profiled steps' time
against the steps before (cold: the process's first trace; warm: later ones).

The simulated GPUs (``--gpus``): ``clib``, the tests' C ``libnvidia-ml.so.1`` (:mod:`tests.fake_libnvml`, built
with the C compiler) under the real nvidia-ml-py, i.e. everything a real GPU costs except the driver's own time in
each call; ``fake``, the tests' Python stand-in for pynvml (``tests.fake_gpus:eight_gpus``), whose own Python is
part of what it measures; ``real``, the GPUs NVML sees.
Prints markdown tables; writes no file (other than its temporary directory).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aonkit.live.status import read_json, running_pid  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
FLUSH_S = 30.0
"""The measured daemons' Parquet interval (the default is 60 s): each measured minute holds two flushes."""

READER = r"""
import sys, time, numpy as np
import aonkit.live
r = aonkit.live.attach()
seconds, poll = float(sys.argv[1]), float(sys.argv[2])
frame, cursor = r.read(0)
lat, rows, start = [], 0, cursor
end = time.monotonic() + seconds
while time.monotonic() < end:
    frame, cursor = r.read(cursor)
    now = time.time_ns()
    if len(frame):
        ts = frame["ts_ns"].to_numpy()[:: len(r.channels)]
        lat.extend((now - ts).tolist())
        rows += len(ts)
    time.sleep(poll)
lat = np.array(lat) / 1e6
print(f"{np.median(lat):.3f} {np.percentile(lat, 99):.3f} {rows} {cursor - start - rows}", flush=True)
"""

TRAIN = r"""
import os, sys, time
import torch
import aonkit.live
aonkit.live.serve()
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(256, 256), torch.nn.ReLU())])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256)
print("up", flush=True)
while not os.path.exists(sys.argv[1]):
    t0 = time.time_ns()
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
    print(t0, time.time_ns(), flush=True)
"""


class World:
    def __init__(self, fake: str | None, extra_env: dict[str, str] | None = None) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="aonb-", dir="/tmp"))
        self.env = {**os.environ, "AONKIT_RUNTIME_DIR": str(self.base / "run"), "AONKIT_DATA_DIR": str(self.base / "data"),
                    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self.env.pop("AONKIT_FAKE_NVML", None)
        if fake:
            self.env["AONKIT_FAKE_NVML"] = fake
        self.env.update(extra_env or {})

    def cli(self, *args: str) -> str:
        r = subprocess.run([sys.executable, "-m", "aonkit.cli", *args], env=self.env, capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(r.stderr)
        return r.stdout

    def start(self, interval: float = 0.1, flush: float = 60.0, extra: tuple[str, ...] = ()) -> int:
        self.cli("daemon", "start", "--interval", str(interval), "--flush", str(flush), *extra)
        self.pid = running_pid(self.base / "run")
        return self.pid

    def cpu_s(self) -> float:
        f = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / TICK

    def rss_mb(self) -> tuple[float, float]:
        text = Path(f"/proc/{self.pid}/status").read_text()
        get = {k: int(v.split()[0]) / 1024 for k, v in (line.split(":", 1) for line in text.splitlines()) if k in ("VmRSS", "VmHWM")}
        return get["VmRSS"], get["VmHWM"]

    def cpu_pct(self, seconds: float) -> float:
        c0, w0 = self.cpu_s(), time.monotonic()
        time.sleep(seconds)
        return 100 * (self.cpu_s() - c0) / (time.monotonic() - w0)

    def stop(self) -> dict:
        os.kill(self.pid, signal.SIGTERM)
        while running_pid(self.base / "run") is not None:
            time.sleep(0.05)
        return read_json(self.base / "run" / "daemon.json", "status") or {}

    def disk_bytes(self) -> int:
        return sum(p.stat().st_size for p in (self.base / "data").rglob("part-*.parquet"))

    def spawn(self, code: str, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", code, *args], env=self.env, stdout=subprocess.PIPE, text=True,
                                stderr=subprocess.DEVNULL)

    def close(self) -> None:
        if running_pid(self.base / "run") is not None:
            os.kill(self.pid, signal.SIGKILL)
        shutil.rmtree(self.base, ignore_errors=True)


def real_gpus() -> int:
    """How many GPUs the real NVML sees (0 without a driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver, no library: no real GPU to measure
        return 0


def daemon_cost(seconds: float, readers: int, gpus: str = "clib,fake") -> None:
    print("\n### Daemon at 10 Hz\n")
    latency_rows, runs = [], []
    kinds = set(gpus.split(","))
    if "real" in kinds:
        n = real_gpus()
        runs += [(f"host + {n} real GPUs (GPM every 1 s, slow metrics every 10 s: the defaults)", "", n, {}),
                 (f"host + {n} real GPUs (GPM at 10 Hz, slow metrics every 1 s)", "", n, {},
                  ("--gpm-interval", "0.1", "--slow-interval", "1"))] if n else []
        if not n:
            print("(no real GPU: NVML does not start here)\n")
    if "clib" in kinds:
        from tests import fake_libnvml

        try:
            env = {k: v for k, v in fake_libnvml.environ(8).items() if k == "LD_LIBRARY_PATH" or k.startswith("AONKIT_FAKE")}
            runs += [("host + 8 simulated GPUs (nvidia-ml-py over a C libnvidia-ml)", None, 8, env)]
        except fake_libnvml.NoCompiler as exc:
            print(f"({exc}: no C-library row)\n")
    if "fake" in kinds:
        runs += [("host + 8 fake GPUs (Python fake of pynvml)", "tests.fake_gpus:eight_gpus", 8, {})]
    if kinds - {"real"}:
        runs += [("host only", "tests.fake_gpus:no_driver", 0, {})]
    print("| sampled | channels | CPU % of a core | a flush's CPU ms | CPU s to the first flush | RSS MB (peak) "
          "| Parquet bytes / GPU-hour | samples lost |")
    print("|---|---|---|---|---|---|---|---|")
    for label, fake, n_gpu, extra, *args in runs:
        w = World(fake, extra)
        try:
            w.start(flush=FLUSH_S, extra=args[0] if args else ())
            first = time.monotonic() + 4 * FLUSH_S
            while not read_json(w.base / "run" / "daemon.json", "status").get("flushes") and time.monotonic() < first:
                time.sleep(0.2)  # steady state: imports, the NVML probe and the first flush (pyarrow's import) done
            start_cpu = w.cpu_s()
            cpu = w.cpu_pct(seconds)
            rss, hwm = w.rss_mb()
            flush_ms = read_json(w.base / "run" / "daemon.json", "status").get("last_flush_cpu_ms", float("nan"))
            if n_gpu and not latency_rows:  # readers of the first run with GPUs
                latency_rows = reader_latency(w, readers, min(20.0, seconds))
            st = w.stop()
            hours = st["samples"] * st["interval_s"] / 3600  # the time the files cover
            per = f"{w.disk_bytes() / hours / n_gpu / 1e6:.2f} MB" if n_gpu else f"host: {w.disk_bytes() / hours / 1e6:.2f} MB/h"
            print(f"| {label} | {st['channels']} | {cpu:.2f} | {flush_ms:.1f} | {start_cpu:.2f} | {rss:.0f} ({hwm:.0f}) | {per} "
                  f"| {st['lost']} |")
        finally:
            w.close()
    print(f"\n### Readers ({runs[0][0] if runs else 'none'} at 10 Hz): sample time stamp to long-form table\n")
    print("| readers | poll | latency median ms | p99 ms | samples read (fewest) / missed (most) | daemon CPU % meanwhile |")
    print("|---|---|---|---|---|---|")
    for row in latency_rows:
        print(row)


def reader_latency(w: World, readers: int, seconds: float) -> list[str]:
    rows = []
    for n, poll in ((1, 0.001), (readers, 0.01)):
        procs = [w.spawn(READER, str(seconds), str(poll)) for _ in range(n)]
        time.sleep(2)  # their imports
        cpu = w.cpu_pct(seconds - 2)
        outs = [p.communicate()[0].split() for p in procs]
        med = np.median([float(o[0]) for o in outs])
        p99 = max(float(o[1]) for o in outs)
        got = min(int(o[2]) for o in outs)
        lost = max(int(o[3]) for o in outs)
        rows.append(f"| {n} | {poll * 1e3:g} ms | {med:.2f} | {p99:.2f} | {got} / {lost} | {cpu:.2f} |")
    return rows


def trace_cost(steps: int, repeats: int) -> None:
    from aonkit.live.trace import run_trace

    w = World("tests.fake_gpus:eight_gpus")
    stop = w.base / "stop"
    try:
        w.start()
        os.environ.update({k: v for k, v in w.env.items() if k.startswith("AONKIT")})
        proc = w.spawn(TRAIN, str(stop))
        assert proc.stdout.readline().strip() == "up"
        lines: list[tuple[int, int]] = []
        import threading

        threading.Thread(target=lambda: [lines.append(tuple(map(int, x.split()))) for x in proc.stdout], daemon=True).start()
        time.sleep(8)
        print(f"\n### On-demand trace of a torch CPU loop (4 x Linear(256), batch 64, 1 thread), {steps} steps\n")
        print("| trace | request to first profiled step ms | step ms before | profiled step ms | slowdown | trace + bundle s |")
        print("|---|---|---|---|---|---|")
        for k in range(repeats):
            asked = time.time_ns()
            t = time.monotonic()
            out = run_trace(proc.pid, steps=steps, out=w.base / f"t{k}")
            total = time.monotonic() - t
            import json

            m = json.loads((out / "aonkit-bundle.json").read_text())
            t0, t1 = m["t0_ns"], m["t1_ns"]
            before = [b - a for a, b in lines if b < asked][-50:]
            during = [b - a for a, b in lines if a >= t0 and b <= t1]
            slow = np.median(during) / np.median(before)
            print(f"| {'cold' if k == 0 else 'warm'} | {(t0 - asked) / 1e6:.1f} | {np.median(before) / 1e6:.2f} | "
                  f"{np.median(during) / 1e6:.2f} | {slow:.2f}x | {total:.2f} |")
            time.sleep(2)
        stop.touch()
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
        w.close()


def trace_all_ranks(steps: int, repeats: int) -> None:
    """``--all-ranks`` over two loops: request to the first profiled step, and the ranks' first steps' spread."""
    import json
    import threading

    from aonkit.live.trace import run_trace

    w = World("tests.fake_gpus:eight_gpus")
    stop = w.base / "stop"
    procs: list[subprocess.Popen] = []
    try:
        w.start()
        os.environ.update({k: v for k, v in w.env.items() if k.startswith("AONKIT")})
        for r in range(2):
            env = {**w.env, "AONKIT_JOB_ID": "bench", "RANK": str(r), "WORLD_SIZE": "2"}
            procs.append(subprocess.Popen([sys.executable, "-c", TRAIN, str(stop)], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True))  # fmt: skip
            assert procs[-1].stdout.readline().strip() == "up"
            threading.Thread(target=procs[-1].stdout.read, daemon=True).start()  # (its step lines: not read here)
        time.sleep(8)
        print(f"\n### `--all-ranks` of two such loops (the ranks agree on their first step), {steps} steps\n")
        print("| trace | request to first profiled step ms | ranks' first profiled steps apart ms | trace + folder s |")
        print("|---|---|---|---|")
        for k in range(repeats):
            asked, t = time.time_ns(), time.monotonic()
            out = run_trace(procs[0].pid, steps=steps, out=w.base / f"j{k}", all_ranks=True)
            total = time.monotonic() - t
            t0 = [r["t0_ns"] for r in json.loads((out / "aonkit-trace.meta.json").read_text())["ranks"]]
            print(f"| {'cold' if k == 0 else 'warm'} | {(min(t0) - asked) / 1e6:.1f} | {(max(t0) - min(t0)) / 1e6:.2f} "
                  f"| {total:.2f} |")
            time.sleep(2)
        stop.touch()
        for proc in procs:
            proc.wait(30)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        w.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0, help="measured time per daemon (default 60: a minute)")
    ap.add_argument("--readers", type=int, default=10)
    ap.add_argument("--trace-steps", type=int, default=20)
    ap.add_argument("--trace-repeats", type=int, default=3, help="on-demand traces (0: skip that part)")
    ap.add_argument("--gpus", default="clib,fake",
                    help="comma-separated: real (the GPUs NVML sees), clib (8 GPUs of the tests' C libnvidia-ml, "
                         "through nvidia-ml-py), fake (8 GPUs of the tests' Python fake of pynvml); "
                         "default clib,fake")
    args = ap.parse_args()
    if bad := set(args.gpus.split(",")) - {"real", "clib", "fake"}:
        ap.error(f"--gpus: unknown {sorted(bad)} (real, clib, fake)")
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    daemon_cost(args.seconds, args.readers, args.gpus)
    if args.trace_repeats:
        trace_cost(args.trace_steps, args.trace_repeats)
        trace_all_ranks(args.trace_steps, args.trace_repeats)


if __name__ == "__main__":
    main()
