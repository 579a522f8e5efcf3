"""Where the daemon's 10 Hz tick goes: thread CPU per part, each timed just after a wake-up, as the daemon runs it.

Usage: ``PYTHONPATH=. python bench/daemon_tick.py [--gpus 8] [--ticks 50] [--rounds 3]`` (re-executes itself with
the tests' C ``libnvidia-ml.so.1`` on ``LD_LIBRARY_PATH``: nvidia-ml-py over simulated GPUs, as ``bench/daemon.py
--gpus clib``).

Each variant sleeps to the next 100 ms boundary (``select``, as the daemon), then runs its part once and adds the
thread's CPU time for it (``time.thread_time_ns``, about 1 µs itself); variants alternate, ``--rounds`` times, so
the VM's drift hits all alike. Parts: nothing; the host sample (two ``pread`` of ``/proc``); the GPUs'
``NvmlSampler.sample_list``; the ring write (pack, CRC-32, store) of a tick's values; all three as the daemon's
``_read_tick`` and ``Ring.write``. Then each NVML reader kind over all GPUs, and the floors: a Python thread's bare
wake-up by ``time.sleep`` and ``select``. Each part timed alone pays the cold start after a wake-up (slow caches
and first calls: tens of µs), which the whole tick pays once, so the parts add up to more than the whole.
Prints markdown; writes nothing but a ring file in a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def per_wakeup(fn, ticks: int) -> float:
    """Mean thread CPU µs of ``fn()`` run once just after each of ``ticks`` 100 ms wake-ups."""
    acc, t = 0, time.monotonic()
    for _ in range(ticks):
        t += 0.1
        select.select([], [], [], max(0.0, t - time.monotonic()))
        c0 = time.thread_time_ns()
        fn()
        acc += time.thread_time_ns() - c0
    return acc / ticks / 1e3


def wake_cost(sleep, ticks: int) -> float:
    """Mean thread CPU µs of one loop turn that only sleeps to the next 100 ms boundary with ``sleep``."""
    c0, t = time.thread_time_ns(), time.monotonic()
    for _ in range(ticks):
        t += 0.1
        sleep(max(0.0, t - time.monotonic()))
    return (time.thread_time_ns() - c0) / ticks / 1e3


def table(rows: dict[str, list[float]], unit: str) -> None:
    print(f"| part | {unit}, each round | mean |\n|---|---|---|")
    for name, got in rows.items():
        print(f"| {name} | {', '.join(f'{x:.0f}' for x in got)} | {sum(got) / len(got):.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--ticks", type=int, default=50, help="wake-ups per variant and round (default 50: 5 s)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if os.environ.get("AONKIT_FAKE_NVML_GPUS") != str(args.gpus):  # load the C library before pynvml does
        from tests import fake_libnvml

        try:
            env = fake_libnvml.environ(args.gpus)
        except fake_libnvml.NoCompiler as exc:
            sys.exit(f"no simulated GPUs: {exc}")
        os.execve(sys.executable, [sys.executable, *sys.argv], env)

    from aonkit.live.options import DEFAULTS  # the daemon's own settings
    from aonkit.live.ring import Ring
    from aonkit.sources.nvml import open_gpu_sampler
    from aonkit.sources.samplers import HostSampler

    gpu, note = open_gpu_sampler(interval_s=0.1, capacity=1, gpm_min_interval_s=DEFAULTS["gpm_interval"],
                                 slow_interval_s=DEFAULTS["slow_interval"])  # fmt: skip
    if gpu is None:
        sys.exit(note)
    host = HostSampler(0.1, capacity=1)
    tmp = tempfile.TemporaryDirectory(prefix="aonkit-tick-")
    ring = Ring.create(Path(tmp.name) / "ring", host.channels + gpu.channels, 600, 100_000_000)
    values = list(host.sample()) + gpu.sample_list()

    def tick() -> None:
        ring.write(time.time_ns(), list(host.sample()) + gpu.sample_list())

    parts = {"nothing": lambda: None, "host sample": host.sample, "GPUs (`sample_list`)": gpu.sample_list,
             "ring write": lambda: ring.write(time.time_ns(), values), "the whole tick": tick}
    kinds: dict[str, list] = {}
    for g in gpu._gpus:
        for read, slow, _, _, reader in g.plan:
            if not slow:
                kinds.setdefault(",".join(reader.metrics[:2]), []).append((read, g.handle))
    readers = {f"`{name}`": (lambda lst=lst: [read(h) for read, h in lst]) for name, lst in kinds.items()}
    for _ in range(12):
        tick()  # rates and GPM have their first values; the slow readers have read
    got: dict[str, list[float]] = {k: [] for k in parts}
    by_kind: dict[str, list[float]] = {k: [] for k in readers}
    floors: dict[str, list[float]] = {"`time.sleep`": [], "`select.select`": []}
    for _ in range(args.rounds):
        for name, fn in parts.items():
            got[name].append(per_wakeup(fn, args.ticks))
        for name, fn in readers.items():
            by_kind[name].append(per_wakeup(fn, args.ticks))
        floors["`time.sleep`"].append(wake_cost(time.sleep, args.ticks))
        floors["`select.select`"].append(wake_cost(lambda s: select.select([], [], [], s), args.ticks))
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}; {note}; {len(ring.channels)} channels\n")
    print(f"### One part of the tick just after a wake-up (thread CPU µs, {args.ticks} wake-ups a round)\n")
    table(got, "µs")
    print(f"\n### Each fast NVML reader over the {args.gpus} GPUs, just after a wake-up\n")
    table(by_kind, "µs")
    print("\n### A Python thread's bare 10 Hz wake-up (the loop's floor)\n")
    table(floors, "µs a wake-up")
    ring.close()
    gpu.close()
    tmp.cleanup()


if __name__ == "__main__":
    main()
