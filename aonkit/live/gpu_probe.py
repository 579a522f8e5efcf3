"""The daemon looks again for GPUs it did not find at its start: a driver loaded later is sampled from then on.

At boot a daemon's unit can start before the NVIDIA driver is usable: the kernel module is loaded later by
``nvidia-persistenced`` or a modprobe unit, a cluster's GPU operator installs the driver from a container minutes
after the node is up, and a node may get ``libnvidia-ml`` while the daemon runs. Found without NVML, the daemon
would sample the host only until someone restarts it. So while it has no GPU sampler, a thread opens one again after
:data:`FIRST_RETRY_S`, then at doubling delays up to ``gpu_retry_s`` (60 s by default; 0: never). A failing look
costs what NVML's failing start costs (a ``dlopen`` search, or ``nvmlInit`` returning "driver not loaded").

When one opens, the sampling thread, at its next tick (:meth:`GpuProbe._take_gpus`): writes the ring's samples to
Parquet, makes a new ring with the host's and the GPUs' channels (renamed in over the old one), marks the old ring
replaced and samples the GPUs from then on. A reader follows to the new ring as soon as it has read the old one
(:meth:`aonkit.live.reader.LiveReader.read`): its cursor goes on counting, its channels are the new ring's, and
``LiveMonitor`` lays its charts out again. In the Parquet files the GPUs' rows start at that tick. ``stats``:
``gpu_looks`` (failed looks so far), ``gpus_found_ns`` (when they were found; None before).

A driver of another version loaded after the daemon loaded its NVML library (an upgrade while it sampled the host
only) makes ``nvmlInit`` fail with a version mismatch for good in this process. Then the daemon stops as on
SIGTERM (every sample written) and starts again in a new process image with the same command line and pid
(:func:`aonkit.live.daemon.run_daemon`), which loads the new library; readers follow it as across any restart. Not
when the mismatch was there at its start already (a broken install: it would start again forever).

While it samples GPUs, a thread looks every ``gpu_check_s`` (30 s by default; 0: never) whether the GPUs NVML sees
are still those the sampler was made for (:func:`aonkit.sources.nvml_mig.gpu_layout`: each GPU's UUID and MIG
devices; about 5 NVML calls per GPU). A GPU added (hot-plug, a GPU operator handing one over) or removed, or MIG
reconfigured (instances made or destroyed: the old MIG handles no longer read), opens a new sampler, taken at the
next tick as above; the old one is closed. ``stats``: ``gpu_changes`` and ``gpu_changed_ns``. A layout whose sampler
cannot be opened (every GPU gone) is not tried again until the layout changes once more; the old sampler goes on,
with NaN and gaps for what it cannot read.

A mixin of :class:`aonkit.live.daemon.Daemon` (its ``gpu``, ``gpu_note``, ``channels``, ``host_sampler``,
``stats``, ``_stop``, ``_flush_lock``, ``open_gpu``, ``_swap_ring``, ``_watch_loop`` and ``_write_status``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from ..sources.nvml_start import STALE_LIBRARY

FIRST_RETRY_S = 5.0
"""The first look again after a start without GPUs; each later one waits twice as long, up to ``gpu_retry_s``."""
RETAKE_S = 5.0
"""When no new ring could be made for the GPUs found, the sampling thread tries again this long later."""


def retry_delays(most_s: float, first_s: float = FIRST_RETRY_S) -> list[float]:
    """The waits before the first looks again: ``first_s`` doubling up to ``most_s`` (the wait from then on).

    ``most_s`` <= 0: no looks (empty). A ``most_s`` below ``first_s`` is every wait.
    """
    if most_s <= 0:
        return []
    out = [min(first_s, most_s)]
    while out[-1] < most_s:
        out.append(min(2 * out[-1], most_s))
    return out


class GpuProbe:
    """Opens the GPU sampler again while the daemon has none (see the module)."""

    gpu: Any
    gpu_note: str
    gpu_retry_s: float
    gpu_check_s: float
    _checking: bool  # the thread that looks whether the GPUs changed is running
    _change: str  # what changed, in words, for the sampler in _found
    stats: dict[str, Any]
    _stop: threading.Event
    _flush_lock: threading.Lock
    _found: Any  # a GPU sampler the look opened, for the sampling thread to take (None: none waiting)
    _nvml: Any  # the NVML binding the daemon was given (None: pynvml)
    _wake: tuple[int, int]
    reexec: str | None

    def _start_probe(self) -> None:
        """Start the looking thread: for GPUs when the daemon samples none (``gpu_retry_s`` > 0), else for changes."""
        self._stale_at_start = self.gpu is None and self.gpu_note.startswith(STALE_LIBRARY)  # (no loop of starts)
        if self.gpu is None and self.gpu_retry_s > 0:
            threading.Thread(target=self._probe_loop, name="aonkit-gpu-probe", daemon=True).start()
        self._start_check()

    def _start_check(self) -> None:
        if self.gpu is not None and self.gpu_check_s > 0 and not self._checking:
            self._checking = True
            threading.Thread(target=self._check_loop, name="aonkit-gpu-check", daemon=True).start()

    def _check_loop(self) -> None:
        from ..sources.nvml_mig import gpu_layout

        tried = None  # the last layout a sampler was opened for
        while not self._stop.wait(self.gpu_check_s):
            gpu = self.gpu
            if self._found is not None:  # the last one opened is not taken yet
                continue
            now = gpu_layout(gpu.nvml)
            if gpu.layout is None:  # not known when the sampler was made: this look is the baseline
                gpu.layout = now
                continue
            if now is None or now == gpu.layout or now == tried:
                continue
            tried = now
            new, note = self.open_gpu(self._nvml)
            if new is None:
                print(f"aonkit daemon: the GPUs changed, and {note.removesuffix('; sampling the host only')}; "
                      "sampling the ones it had", file=sys.stderr, flush=True)  # fmt: skip
                continue
            self._change = layout_change(gpu.layout, new.layout)
            self._found = new

    def _probe_loop(self) -> None:
        delays = retry_delays(self.gpu_retry_s)
        i = 0
        while not self._stop.wait(delays[min(i, len(delays) - 1)]):
            i += 1
            gpu, note = self.open_gpu(self._nvml)
            if gpu is not None:
                self._found = gpu
                return
            self.stats["gpu_looks"] += 1
            self.gpu_note = note
            if note.startswith(STALE_LIBRARY) and not self._stale_at_start:
                self._start_again(note.removesuffix("; sampling the host only"))
                return

    def _start_again(self, why: str) -> None:
        """Stop, with every sample written, so that :func:`.daemon.run_daemon` starts this daemon again."""
        self.reexec = why
        self._stop.set()
        os.write(self._wake[1], b"x")

    def _take_gpus(self) -> None:
        """On the sampling thread: sample the GPUs the look found, in a new ring (see the module)."""
        if self._found is None or time.monotonic() < self._take_after:
            return
        gpu, old = self._found, self.gpu
        channels = self.host_sampler.channels + gpu.channels
        with self._flush_lock:  # the flusher writes the old ring with the old channels, or the new with the new
            if not self._swap_ring(channels):  # the old ring is kept; tried again a little later
                self._take_after = time.monotonic() + RETAKE_S
                return
            self.gpu, self.channels = gpu, channels
        self._found = None
        if old is None:
            self.gpu_note = _found_note(gpu)
            self.stats["gpus_found_ns"] = time.time_ns()
            threading.Thread(target=self._watch_loop, name="aonkit-gpu-watch", daemon=True).start()
            self._start_check()
        else:
            old.close()
            self.gpu_note = (f"the GPUs changed ({self._change}): sampling GPU {', '.join(map(str, gpu.devices))}, "
                             f"{len(gpu.metrics)} metrics, {gpu.n_unsupported} left out")  # fmt: skip
            self.stats["gpu_changes"] += 1
            self.stats["gpu_changed_ns"] = time.time_ns()
        print(f"aonkit daemon: {self.gpu_note}; a new ring with {len(channels)} channels", file=sys.stderr,
              flush=True)  # fmt: skip
        self._write_status("running")


def _found_note(gpu: Any) -> str:
    return (f"found GPU {', '.join(map(str, gpu.devices))} after the start: {len(gpu.metrics)} metrics, "
            f"{gpu.n_unsupported} left out")  # fmt: skip


def layout_change(before: tuple | None, after: tuple | None) -> str:
    """What differs between two :func:`~aonkit.sources.nvml_mig.gpu_layout`, in words (UUIDs left out)."""
    if before is None or after is None:
        return "the layout was not known"
    old, new = dict(before), dict(after)
    words = [f"{len(set(new) - set(old))} GPU added"] if set(new) - set(old) else []
    words += [f"{len(set(old) - set(new))} GPU removed"] if set(old) - set(new) else []
    for i, uuid in enumerate(u for u, _ in after):
        if uuid in old and old[uuid] != new[uuid]:
            was, now = (len(m) if m is not None else None for m in (old[uuid], new[uuid]))
            words.append(f"GPU {i}: " + ("MIG disabled" if now is None else "MIG enabled" if was is None else
                                          f"{was} -> {now} MIG devices" if was != now else "MIG reconfigured"))
    return ", ".join(words) or "reordered"
