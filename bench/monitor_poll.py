"""``LiveMonitor.poll``'s CPU per poll, without a page: over an in-process ``NvmlSampler`` and over a daemon's reader.

* ``sampler``: the tests' Python fake of pynvml with 8 GPUs (272 channels) sampled at 20 Hz in this process;
* ``reader``: ``aonkit daemon`` with the same 8 fake GPUs at 20 Hz, ``aonkit.live.attach()`` here.

A poll every 50 ms (about one new sample each), 600 rows kept; the first 20 polls are left out. Prints the median,
p90 and worst per poll. Compare two commits by running this file with ``PYTHONPATH`` at each::

    PYTHONPATH=. python bench/monitor_poll.py --polls 200
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _polls(mon, polls: int) -> np.ndarray:
    times = []
    for _ in range(polls + 20):
        time.sleep(0.05)
        t = time.perf_counter()
        mon.poll()
        times.append(time.perf_counter() - t)
    return np.array(times[20:]) * 1e3


def _row(what: str, ms: np.ndarray, channels: int) -> None:
    print(f"| {what} | {channels} | {np.median(ms):.2f} | {np.percentile(ms, 90):.2f} | {ms.max():.2f} |")


def over_sampler(polls: int) -> None:
    from aonkit.sources.nvml import NvmlSampler
    from aonkit.widgets import LiveMonitor
    from tests.fake_gpus import eight_gpus

    s = NvmlSampler(nvml=eight_gpus(), interval_s=0.05)
    mon = LiveMonitor(s, rollover=600)
    try:
        _row("NvmlSampler, 8 fake GPUs", _polls(mon, polls), len(s.channels))
    finally:
        s.stop()


def over_reader(polls: int) -> None:
    from daemon import World

    w = World("tests.fake_gpus:eight_gpus")
    try:
        w.start(interval=0.05)
        os.environ.update({k: v for k, v in w.env.items() if k.startswith("AONKIT")})
        import aonkit.live
        from aonkit.widgets import LiveMonitor

        reader = aonkit.live.attach()
        mon = LiveMonitor(reader, rollover=600)
        _row("daemon's reader, 8 fake GPUs", _polls(mon, polls), len(reader.channels))
        reader.close()
    finally:
        w.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--polls", type=int, default=200)
    ap.add_argument("--only", choices=["sampler", "reader"])
    args = ap.parse_args()
    print("| LiveMonitor over | channels | poll ms median | p90 | worst |")
    print("|---|---|---|---|---|")
    if args.only != "reader":
        over_sampler(args.polls)
    if args.only != "sampler":
        over_reader(args.polls)


if __name__ == "__main__":
    main()
