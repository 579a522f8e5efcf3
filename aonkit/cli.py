"""Command line: ``aonkit summary``, ``cache``, ``report``, ``diff``, ``what-if``, ``step-times``, ``demo``..."""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__
from ._cli_errors import error_line
from .errors import AonkitWarning

if TYPE_CHECKING:
    from .trace import Trace

# Subcommands import what they use when they run: `aonkit daemon run` never loads pandas.


def _traces(paths: list[str], salvage: bool) -> list[tuple[str, Trace]]:
    """Each trace of the files and directories on its own (a directory need not be one job), labelled.

    The label is ``rank N`` when the trace's rank is known and no other trace claims it, else the file's stem.
    """
    from .cache import CACHE_SUFFIX, cache_path_for
    from .jobcheck import claimed_rank
    from .sources import load_each

    found: list[Trace] = []
    for p in paths:
        found += load_each(p, salvage=salvage).values()
    ranks = [claimed_rank(t) for t in found]
    out = []
    for t, r in zip(found, ranks):
        stem = cache_path_for(t.meta.path or "trace").name.removesuffix(CACHE_SUFFIX)
        out.append((f"rank {r}" if r is not None and ranks.count(r) == 1 else stem, t))
    return out


def cmd_summary(args: argparse.Namespace) -> int:
    """Print the summary of each trace."""
    from .analysis.summary import summarize
    from .report.text import format_summary

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AonkitWarning)  # each summary lists its trace's warnings itself
        found = _traces(args.paths, args.salvage)
    for label, trace in found:
        print(format_summary(summarize(trace, args.top), label))
        print()
    for path in args.paths:
        for line in _traced_job_lines(Path(path)):
            print(line)
    return 0


def _traced_job_lines(folder: Path) -> list[str]:
    """A job folder ``aonkit trace`` wrote: its ranks and hosts, the rank the others waited for, its notes."""
    from .analysis.step_lags import latest_rank
    from .sources.traced_job import is_traced_job, job_clocks, job_hosts, read_job_manifest

    if not (folder.is_dir() and is_traced_job(folder)):
        return []
    lags, notes = read_job_manifest(folder)
    hosts, clocks = len(set(job_hosts(lags).values())), len(set(job_clocks(lags).values()))
    nodes = f" ({clocks} node(s) by boot id: one clock each)" if hosts and clocks != hosts else ""
    late = latest_rank(lags, notes)
    return [f"job traced by aonkit trace: {len(lags)} rank(s) on {hosts or 'unrecorded'} host(s){nodes}",
            *([f"  {late.sentence()}"] if late else []), *(f"  note: {n}" for n in notes)]  # fmt: skip


def cmd_cache(args: argparse.Namespace) -> int:
    """Save each trace (files, or every trace file of a directory) as a verified Parquet cache."""
    from .cache import cache_path_for, is_fresh
    from .sources import load_trace
    from .sources.discover import CACHE_SUFFIXES, directory_files

    files: list[Path] = []
    for path in map(Path, args.paths):
        if path.is_dir():
            found, notes = directory_files(path)
            for note in notes:
                print(f"aonkit: {path}: {note}", file=sys.stderr)
            files += [f for f in found if not f.name.lower().endswith(CACHE_SUFFIXES)]
        elif not path.exists():
            raise FileNotFoundError(f"no such trace file or directory: {path}")
        else:
            files.append(path)
    for src in files:
        t0 = time.perf_counter()
        out = cache_path_for(src, args.out)
        if not args.force and is_fresh(out, src):
            print(f"{src} -> {out} (up to date)")
            continue
        load_trace(src, salvage=args.salvage).save(out, source_text=True)
        print(f"{src} -> {out} ({time.perf_counter() - t0:.2f} s)")
    return 0


def cmd_hta_report(args: argparse.Namespace) -> int:
    """Write HTA 0.5.0-compatible CSVs for one job (files or a directory of ranks)."""
    from .report.hta_report import write_hta_report
    from .sources import load_job

    job = load_job(args.inputs if len(args.inputs) > 1 else args.inputs[0], salvage=args.salvage,
                   on_conflict=args.on_conflict)
    traces = dict(job.items())
    for path in write_hta_report(traces, Path(args.out), include_last_step=args.include_last_step):
        print(path)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Write a self-contained HTML report per trace (one file, or one per rank for a job)."""
    from .report.html_report import write_report
    from .sources import load_job

    if args.combined:
        from .analysis.combine import combine_ranks

        job = load_job(args.input, salvage=args.salvage, on_conflict=args.on_conflict)
        traces = [("job", combine_ranks(job))]
    else:
        traces = _traces([args.input], args.salvage)
    out = Path(args.output)
    for label, trace in traces:
        t0 = time.perf_counter()
        path = out if len(traces) == 1 else out.with_name(f"{out.stem}-{label.replace(' ', '')}{out.suffix}")
        write_report(trace, path, width_px=args.width, critical_path=args.critical_path)
        print(f"{label}: {path} ({path.stat().st_size / 1e6:.1f} MB, {time.perf_counter() - t0:.1f} s)")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    """Print what changed from one trace (or job) to another, and write the picture as an HTML page."""
    from .analysis.diff import trace_diff
    from .report.diff_report import write_diff_report
    from .sources import load
    from .units import fmt_ns
    from .views.diff import short_name

    base, new = (load(p, salvage=args.salvage) for p in (args.base, args.new))
    d = trace_diff(base, new, by=args.by)
    labels = [Path(p).name for p in (args.base, args.new)]
    print(f"{labels[0]} -> {labels[1]}: {len(d):,} {args.by} names, {int(d['significant'].sum()):,} significant")
    for r in d.head(args.top).itertuples():
        pct = "only in one" if r.delta_mean_pct != r.delta_mean_pct else f"{r.delta_mean_pct:+6.1f}%"
        print(f"  {fmt_ns(r.delta_total_ns):>10} total  {pct:>11} per call  {'*' if r.significant else ' '}  "
              f"{short_name(str(r.name), 70)}")
    path = write_diff_report(d, args.output, *labels, top=args.top)
    print(f"picture: {path}  (* = significant change of the mean per call)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the summary on the bundled sample traces and write an HTML page."""
    from .demo import run_demo

    page = run_demo(Path(args.out), Path(args.traces) if args.traces else None)
    print(f"\nwrote {page} (open it in a browser)")
    return 0


def cmd_warmup(args: argparse.Namespace) -> int:
    """Compile every kernel ahead (for images and CI) into Numba's on-disk cache."""
    from .warmup import warmup

    warmup(Path(args.traces) if args.traces else None)
    return 0


SALVAGE_HELP = "keep the complete events of a truncated file (with a warning) instead of failing"
HTA_REPORT_OUT = "hta-report"


def cmd_profile(args: argparse.Namespace) -> int:
    """Run a command under the samplers (and torch.profiler for Python) and write a bundle."""
    from ._cli_profile import run_profile

    return run_profile(args)


def cmd_whatif(args: argparse.Namespace) -> int:
    """``aonkit what-if``: re-time a trace or job under rules (aonkit.what_if)."""
    from ._cli_whatif import run_whatif

    return run_whatif(args)


def cmd_step_times(args: argparse.Namespace) -> int:
    """``aonkit step-times``: forward passes of a traced engine and the serving model's step times fitted to them."""
    from ._cli_steps import run_step_times

    return run_step_times(args)


def cmd_daemon(args: argparse.Namespace) -> int:
    """``aonkit daemon start|run|stop|status``: the always-on sampler (aonkit.live)."""
    from .live.control import daemon_command

    return daemon_command(args)


def cmd_trace(args: argparse.Namespace) -> int:
    """``aonkit trace PID``: an on-demand torch.profiler trace of an opted-in process (aonkit.live)."""
    from .live.trace import trace_command

    return trace_command(args)


def build_parser() -> argparse.ArgumentParser:
    """The ``aonkit`` argument parser."""
    ap = argparse.ArgumentParser(prog="aonkit", description="GPU and ML performance analysis of profiler traces.")
    ap.add_argument("--version", action="version", version=f"aonkit {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("summary", help="GPUs, ranks, span, event counts, top kernels, warnings")
    p.add_argument("paths", nargs="+", help="trace files or directories")
    p.add_argument("--top", type=int, default=10, help="kernels to list (default 10)")
    p.add_argument("--salvage", action="store_true", help=SALVAGE_HELP)
    p.set_defaults(func=cmd_summary)
    p = sub.add_parser("cache", help="convert traces to aonkit's checksummed Parquet cache (<name>.aon.parquet)")
    p.add_argument("paths", nargs="+", help="trace files or directories (every trace file in them)")
    p.add_argument("--out", help="output directory (default: beside each trace)")
    p.add_argument("--force", action="store_true", help="rewrite caches that are already up to date")
    p.add_argument("--salvage", action="store_true", help=SALVAGE_HELP)
    p.set_defaults(func=cmd_cache)
    p = sub.add_parser("hta-report", help="Holistic Trace Analysis 0.5.0-compatible CSV report")
    p.add_argument("inputs", nargs="+", help="trace files of one job, or its directory")
    p.add_argument("--out", default=HTA_REPORT_OUT,
                   help=f"output directory (default: {HTA_REPORT_OUT}/ in the current directory; its CSVs are "
                        "overwritten)")  # fmt: skip
    p.add_argument("--include-last-step", action="store_true", help="keep the last ProfilerStep (HTA drops it)")
    p.add_argument("--salvage", action="store_true", help=SALVAGE_HELP)
    p.add_argument("--on-conflict", choices=("error", "newest", "file-order"), default="error",
                   help="two files for one rank, or files naming no rank: fail (default), keep the newest file, "
                        "or key the files as ranks by file order")
    p.set_defaults(func=cmd_hta_report)
    p = sub.add_parser("report", help="self-contained HTML report: dashboard, roofline, zoomable timeline (offline)")
    p.add_argument("input", help="a trace file (Kineto JSON, nsys .sqlite, .parquet) or a job directory")
    p.add_argument("-o", "--output", default="report.html", help="output file (one per rank for a job)")
    p.add_argument("--width", type=int, default=1400, help="timeline width in pixels (default 1400)")
    p.add_argument("--critical-path", action="store_true",
                   help="outline the critical path on the timeline (aonkit.analysis.critical_path)")
    p.add_argument("--combined", action="store_true",
                   help="a job's ranks in one report, on one clock, a lane set per rank (default: one file per rank)")
    p.add_argument("--salvage", action="store_true", help=SALVAGE_HELP)
    p.add_argument("--on-conflict", choices=("error", "newest", "file-order"), default="error",
                   help="two files for one rank, or files naming no rank: fail (default), keep the newest file, "
                        "or key the files as ranks by file order")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("diff", help="what got slower or faster from one trace (or job) to another, as a picture")
    p.add_argument("base", help="the trace (or job directory) to compare against")
    p.add_argument("new", help="the trace (or job directory) that changed")
    p.add_argument("-o", "--output", default="diff.html", help="HTML page of the picture (default diff.html)")
    p.add_argument("--by", choices=("kernel", "op"), default="kernel", help="compare kernels (default) or CPU ops")
    p.add_argument("--top", type=int, default=15, help="rows printed and drawn (default 15)")
    p.add_argument("--salvage", action="store_true", help=SALVAGE_HELP)
    p.set_defaults(func=cmd_diff)
    from ._cli_whatif import add_whatif_arguments

    p = sub.add_parser("what-if", help="re-time a trace or job with parts of the work faster, or on another GPU")
    add_whatif_arguments(p)
    p.set_defaults(func=cmd_whatif)
    from ._cli_steps import add_step_time_arguments

    p = sub.add_parser("step-times", help="an inference engine's prefill and decode passes in a trace, and the "
                       "serving model's step times fitted to them")  # fmt: skip
    add_step_time_arguments(p)
    p.set_defaults(func=cmd_step_times)
    p = sub.add_parser("profile", help="run a command under aonkit's samplers (and torch.profiler for Python)")
    p.add_argument("--out", help="bundle folder (default aon-profiles/<date>-<time>-<n>)")
    p.add_argument("--interval", type=float, default=0.1, help="sampling interval in s (default 0.1)")
    p.add_argument("--no-trace", action="store_true", help="samplers only, no torch.profiler")
    p.add_argument("--no-gpu", action="store_true", help="do not sample GPUs through NVML")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- python train.py ARGS | -- python -m MOD | -- CMD")
    p.set_defaults(func=cmd_profile)
    p = sub.add_parser("demo", help="summarise the bundled sample traces into an HTML page")
    p.add_argument("--out", default="aonkit-demo", help="output directory (default ./aonkit-demo)")
    p.add_argument("--traces", help="directory of traces (default: the repository's sample_traces/)")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("warmup", help="compile every kernel ahead (for images and CI); later first calls are fast")
    p.add_argument("--traces", help="directory of traces to exercise (default: the repository's sample_traces/)")
    p.set_defaults(func=cmd_warmup)
    from .live.options import add_daemon_arguments, add_trace_arguments

    p = sub.add_parser("daemon", help="always-on host and GPU sampler: start, run, stop, status (docs/daemon.md)")
    add_daemon_arguments(p)
    p.set_defaults(func=cmd_daemon)
    p = sub.add_parser("trace", help="on-demand torch.profiler trace of an opted-in process's next steps")
    add_trace_arguments(p)
    p.set_defaults(func=cmd_trace)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``aonkit`` command."""
    args = build_parser().parse_args(argv)
    shown = warnings.showwarning

    def one_line(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001, ANN202
        if issubclass(category, AonkitWarning):  # what the reader said about the input: no source line
            print(f"aonkit: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = one_line
    try:
        return int(args.func(args))
    except BrokenPipeError:  # stdout's reader left (`aonkit summary ... | head`): nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # one line for what the user can fix; a traceback only for aonkit's own bugs
        inputs = getattr(args, "paths", None) or getattr(args, "inputs", None) or [getattr(args, "input", "")]
        line = error_line(exc, salvage=bool(getattr(args, "salvage", False)), inputs=[str(p) for p in inputs if p])
        if line is None:
            raise
        print(f"aonkit: error: {line}", file=sys.stderr)
        return 2
    finally:
        warnings.showwarning = shown


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
