"""Loads that do not wait for the parser's compilation, and its compilation in the background.

While the Numba trace parser is neither compiled in this process nor in
Numba's on-disk cache, a trace is read by :mod:`.quick_json` (the stdlib's C
JSON scanner; the same table, at 33-81 MB/s instead of ~500 MB/s) and one
background process compiles, into Numba's cache, first what a dashboard or
report of a trace needs (:func:`aonkit.warmup.first_views`: a user's next
step after a load is a view), then the parser, so later loads, in this
process or another, use it, then the arg look-ups' kernels (for which
:mod:`aonkit.arg_text` stands in until then), then the rest of ``aonkit
warmup`` (every analysis, job, what-if, report and model kernel: about a
minute or two of one core). The background process runs
at low priority, writes nothing but Numba's cache, and only one runs per
cache folder (a lock file there).

``AONKIT_QUICK_PARSE``: ``auto`` (default) as above; ``0`` always the Numba
parser (compiling it on the call, as before); ``1`` the quick reader whenever
it applies (tests and benchmarks). ``AONKIT_BACKGROUND_COMPILE=0`` starts no
background process. Past :data:`QUICK_BUDGET` bytes read quickly in one
process, the parser is compiled on the call instead: compiling costs about
what reading 900 MB quickly does, but is paid once, and the quick reader holds
about 3.3x the file in memory at its peak (the parser 2.3x).

``python -m aonkit.warmup --background`` is the background process (:func:`compile_once`; the sources do
not import the analyses, so its entry sits with ``aonkit warmup``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

QUICK_BUDGET = 400 * 1024 * 1024
"""Bytes one process reads with the quick reader before it compiles the parser instead."""

_state: dict = {"quick_bytes": 0, "started": False, "pid": None, "proc": None}


def mode() -> str:
    """``auto``, ``0`` or ``1`` from ``AONKIT_QUICK_PARSE``."""
    value = os.environ.get("AONKIT_QUICK_PARSE", "auto")
    return value if value in ("0", "1") else "auto"


def parser_ready(threads: int) -> bool:
    """Whether a load on ``threads`` threads would compile none of the parser's large kernels."""
    from .._kernels import trace_scan as ks
    from .._kernels._ready import is_ready

    buf = np.zeros(1, np.uint8)
    i64, i32 = np.empty((ks.N64, 1), np.int64), np.empty((ks.N32, 1), np.int32)
    if not is_ready(ks.scan_trace, buf, i64, i32, 1, 1):
        return False
    if threads <= 1:
        return True
    top = np.empty((16, 4), np.int64)
    return is_ready(ks.scan_chunk, buf, 1, 1, i64, i32, 1, 1) and is_ready(ks.scan_tail, buf, 1, top, 1, 1)


def use_quick(nbytes: int, threads: int) -> bool:
    """Whether to read ``nbytes`` with the quick reader (see the module notes)."""
    m = mode()
    if m != "auto":
        return m == "1"
    if _state["quick_bytes"] + nbytes > QUICK_BUDGET:
        return False
    return not parser_ready(threads)


def read_quickly(nbytes: int) -> None:
    """Note a quick read; start the background compilation if none was started."""
    _state["quick_bytes"] += nbytes
    ensure_background()


def ensure_background() -> None:
    """Start the background compilation unless this process started one (a stand-in ran: a kernel is missing)."""
    if mode() == "auto" and not _state["started"]:
        _state["started"] = True
        start_background_compile()


def background_compiling() -> bool:
    """Whether a background compilation is running: the one this process started, or any holding the cache's lock."""
    proc = _state["proc"]
    if proc is not None and proc.poll() is None:  # started, and the lock maybe not yet taken
        return True
    lock = _lock_path()
    if lock is None or not os.path.exists(lock):
        return False
    try:
        import fcntl
    except ImportError:  # Windows: no lock to look at
        return False
    with open(lock, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True  # held: a compilation is running
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False


def _lock_path() -> str | None:
    """The lock file of the background compilation in Numba's cache folder (``None`` when nothing is cached)."""
    from .._kernels import trace_scan as ks

    cache_path = getattr(ks.scan_trace._cache, "cache_path", None)
    return os.path.join(cache_path, "aonkit-parser.lock") if cache_path else None


def start_background_compile() -> subprocess.Popen | None:
    """Start the process that compiles the parser into Numba's cache (``None`` when that cannot help)."""
    from .._kernels._jit import JIT_CACHE

    if not JIT_CACHE or os.environ.get("AONKIT_BACKGROUND_COMPILE", "1") == "0":
        return None
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "AONKIT_QUICK_PARSE": "0", "AONKIT_COMPILE_NOTICE": "0",
           "PYTHONPATH": root + (os.pathsep + path if path else "")}
    try:
        proc = subprocess.Popen(  # noqa: S603 - this interpreter, this module
            [sys.executable, "-m", "aonkit.warmup", "--background"], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
    except OSError:  # no interpreter to start (embedded, frozen): the parser compiles on a later call instead
        return None
    threading.Thread(target=proc.wait, daemon=True, name="aonkit-compile-reaper").start()
    _state["pid"] = proc.pid
    _state["proc"] = proc
    return proc


def _sample_document(n: int = 64) -> np.ndarray:
    """A small trace exercising every branch the parser's kernels type (args, ids, flows, metadata)."""
    events = []
    for k in range(n):
        events.append(f'{{"ph": "X", "cat": "kernel", "name": "k{k % 3}", "pid": 0, "tid": "stream 7", '
                      f'"ts": {1000 + k}.5, "dur": 3, "args": {{"correlation": {k}, "External id": {k}, '
                      f'"stream": 7, "device": 0, "bytes": {k}.25}}}}')
        events.append(f'{{"ph": "s", "id": {k}, "pid": 1, "tid": 2, "ts": {1000 + k}, "bp": "e", "cat": "ac2g"}}')
    text = '{"schemaVersion": 1, "baseTimeNanoseconds": 1000, "traceEvents": [' + ", ".join(events) + '], "x": [1]}'
    return np.frombuffer(text.encode(), np.uint8).copy()


def compile_parser() -> None:
    """Compile the parser's kernels here (one and several threads), then the arg look-ups', into Numba's cache."""
    from .chrome_trace import parse_buffer

    os.environ["AONKIT_QUICK_PARSE"] = "0"
    buf = _sample_document()
    parse_buffer(buf, threads=1)
    trace = parse_buffer(buf, threads=2)
    trace.arg_numbers("bytes")  # the walk and both number readers (until then :mod:`aonkit.arg_text` stands in)
    trace.arg_ints_of(["correlation", "device"])


def compile_once(before: Callable[[], None] | None = None, after: Callable[[], None] | None = None) -> int:
    """The background process's work: ``before()`` (what the first views need), :func:`compile_parser`, ``after()``.

    ``after`` is the rest of ``aonkit warmup`` (every analysis, the job and what-if kernels, the report, the
    models), so that a user's first call of an analysis a minute or two after a first load finds it compiled.
    One per Numba cache folder (a lock file there), at low priority; nothing when kernels are not cached.
    """
    path = _lock_path()
    if not path:
        return 0
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: no lock; a second compilation only repeats the work
        fcntl = None
    with open(path, "a") as lock:
        if fcntl is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return 0  # another process is compiling it
        if hasattr(os, "nice"):
            os.nice(10)
        if before is not None:
            try:
                before()
            except Exception:  # noqa: BLE001 - a head start only: the parser matters more
                pass
        compile_parser()
        if after is not None:
            try:
                after()
            except Exception:  # noqa: BLE001 - a head start only, like ``before``
                pass
    return 0
