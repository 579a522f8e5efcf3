"""``aonkit profile [options] -- COMMAND``: run a Python script or module under :class:`aonkit.Profile`.

``python train.py ARGS`` and ``python -m pkg.mod ARGS`` (or ``train.py ARGS``)
run in this process, as pyinstrument and memray do, so torch.profiler traces
them; any other command runs as a child process with the samplers watching
it (host, and its GPU memory through NVML), without a trace.
"""

from __future__ import annotations

import argparse
import os
import runpy
import subprocess
import sys
import traceback
from pathlib import Path

from .profiling import Profile

_FLAG_WITH_VALUE = ("-W", "-X")
"""Interpreter options followed by a value (``-W error``, ``-X importtime``); others stand alone (``-u``, ``-O``)."""


def _python_target(cmd: list[str]) -> tuple[str, str, list[str], list[str]] | None:
    """("path" | "module", target, argv, interpreter options) for a Python run, else None.

    Interpreter options before the script (``python -u -W error train.py``)
    are skipped, since the script runs in this interpreter, and returned so
    the caller can say so; ``-c`` code runs as a child process.
    """
    flags: list[str] = []
    if cmd and Path(cmd[0]).name.startswith("python") and len(cmd) > 1:
        cmd = cmd[1:]
        while cmd and cmd[0].startswith("-") and cmd[0] not in ("-m", "-c", "-"):
            flags.append(cmd.pop(0))
            if flags[-1] in _FLAG_WITH_VALUE and cmd:
                flags.append(cmd.pop(0))
        if cmd and cmd[0] == "-m" and len(cmd) > 1:
            return "module", cmd[1], cmd[1:], flags
    if cmd and Path(cmd[0]).suffix == ".py":  # a script, not a trace format: no reader involved
        return "path", cmd[0], cmd, flags
    return None


def run_profile(args: argparse.Namespace) -> int:
    """Run ``args.command`` profiled; print the summary; return the command's exit status."""
    cmd = [c for c in args.command if c != "--"] if args.command[:1] == ["--"] else list(args.command)
    if not cmd:
        raise ValueError("aonkit profile: give a command after --, e.g. aonkit profile -- python train.py")
    target = _python_target(cmd)
    status = 0
    if target is None:
        child = subprocess.Popen(cmd)  # noqa: S603 - the user's own command
        prof = Profile(args.out, interval_s=args.interval, trace=False, gpu=not args.no_gpu, pids=[child.pid])
        with prof:
            status = child.wait()
    else:
        kind, name, argv, flags = target
        if flags:
            print(f"aonkit profile: {name} runs in this interpreter, traced; its interpreter options "
                  f"{' '.join(flags)} are not applied", file=sys.stderr)
        prof = Profile(args.out, interval_s=args.interval, trace=not args.no_trace, gpu=not args.no_gpu,
                       pids=[os.getpid()])
        saved = sys.argv[:]
        sys.argv = argv
        prof.start()
        error = None
        try:
            runpy.run_module(name, run_name="__main__", alter_sys=True) if kind == "module" else \
                runpy.run_path(name, run_name="__main__")
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            error = exc if status else None
        except BaseException as exc:  # noqa: BLE001 - reported after the bundle is written
            error, status = exc, 1
            traceback.print_exc()
        finally:
            sys.argv = saved
            prof.stop(error)
    print(prof.summary_text())
    return int(status)
