"""IPython magics: ``%load_ext aonkit``, then ``%%aon_profile [options]`` or ``%aon_profile start|stop|status``.

The cell magic runs the cell under :class:`aonkit.Profile` (samplers, and
torch.profiler when torch is importable), writes the bundle, and shows the
dashboard with the sample lanes under the timeline; terminals and CI logs get
the plain-text summary. The cell's own value is kept as the magic's value
(shown as ``Out[]``); an exception in the cell propagates after the bundle is
written. In the cell, ``aonkit.step()`` advances a ``--wait/--warmup/--active``
schedule. The line magics sample (and trace) across cells.
"""

from __future__ import annotations

import argparse
import ast
import shlex
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

from .profiling import Profile
from .sources import host_compiled


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="%%aon_profile", add_help=False, exit_on_error=False)
    ap.add_argument("action", nargs="?", choices=("start", "stop", "status"), help="line magic only")
    ap.add_argument("--interval", type=float, default=0.1, help="sampling interval in s (default 0.1)")
    ap.add_argument("--no-trace", action="store_true", help="samplers only, no torch.profiler")
    ap.add_argument("--no-gpu", action="store_true", help="do not sample GPUs through NVML")
    for name in ("wait", "warmup", "active"):
        ap.add_argument(f"--{name}", type=int, default=None, help="torch.profiler schedule over aonkit.step() calls")
    ap.add_argument("--out", default=None, help="bundle folder (default aon-profiles/<date>-<time>-<n>)")
    ap.add_argument("--return", dest="ret", default=None, metavar="VAR", help="bind the Profile to VAR")
    ap.add_argument("--quiet", action="store_true", help="show nothing (the bundle is still written)")
    return ap


def _split(code: str) -> tuple[ast.Module, ast.Expression | None]:
    """The cell's statements, and its last expression apart (to keep its value, as IPython does)."""
    tree = ast.parse(code)
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
        return tree, last
    return tree, None


def _named(sampler: Any) -> str:
    """A sampler's class, with its loop where it has a choice (``HostSampler (compiled loop)``)."""
    loop = getattr(sampler, "loop", None)
    return f"{type(sampler).__name__} ({loop} loop)" if loop else type(sampler).__name__


@magics_class
class AonMagics(Magics):
    """The ``aon_profile`` magics."""

    _running: Profile | None = None

    @line_cell_magic
    def aon_profile(self, line: str, cell: str | None = None) -> Any:
        """Profile a cell (``%%aon_profile``) or across cells (``%aon_profile start|stop|status``)."""
        try:
            args = _parser().parse_args(shlex.split(line))
        except (argparse.ArgumentError, SystemExit) as exc:
            raise ValueError(f"%aon_profile: {exc}\n{_parser().format_help()}") from None
        if cell is None:
            return self._line(args)
        prof = self._new(args)
        code = self.shell.transform_cell(cell)
        body, last = _split(code)
        ns = self.shell.user_ns
        value = None
        prof.start()
        try:
            exec(compile(body, "<aon_profile cell>", "exec"), ns)  # noqa: S102 - the user's own cell
            if last is not None:
                value = eval(compile(last, "<aon_profile cell>", "eval"), ns)  # noqa: S307
        except BaseException as exc:
            prof.stop(exc)
            self._show(prof, args)
            raise
        prof.stop()
        prof.value = value
        self._show(prof, args)
        return value

    def _new(self, args: argparse.Namespace) -> Profile:
        if not args.quiet:  # the dashboard shown after the cell imports Numba: do it first, for the host sampler
            host_compiled.preload()
        prof = Profile(args.out, interval_s=args.interval, trace=not args.no_trace, wait=args.wait,
                       warmup=args.warmup, active=args.active, gpu=not args.no_gpu)
        if args.ret:
            self.shell.user_ns[args.ret] = prof
        return prof

    def _show(self, prof: Profile, args: argparse.Namespace) -> None:
        if not args.quiet:
            display(prof)

    def _line(self, args: argparse.Namespace) -> Any:
        if args.action == "start":
            if AonMagics._running is not None:
                raise RuntimeError("%aon_profile is already running: %aon_profile stop first")
            AonMagics._running = self._new(args).start()
            print(f"aon_profile: sampling{' and tracing' if AonMagics._running.tracing else ''} "
                  f"until %aon_profile stop -> {AonMagics._running.path}")
            return None
        if args.action == "stop":
            prof, AonMagics._running = AonMagics._running, None
            if prof is None:
                raise RuntimeError("%aon_profile is not running: %aon_profile start first")
            prof.stop()
            self._show(prof, args)
            return None
        prof = AonMagics._running
        print("aon_profile: not running" if prof is None else f"aon_profile: running since t0={prof.t0_ns} -> "
              f"{prof.path}, samplers: {', '.join(_named(s) for s in prof._samplers)}")
        return None


def register(ipython: Any) -> None:
    """Register the magics with ``ipython`` (what ``%load_ext aonkit`` calls)."""
    ipython.register_magics(AonMagics)
