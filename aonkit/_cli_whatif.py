"""``aonkit what-if``: re-time a trace or a job under rules from the shell (a shell over :func:`aonkit.what_if`)."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from .errors import AonkitError


def add_whatif_arguments(p: argparse.ArgumentParser) -> None:
    """The ``what-if`` subcommand's arguments."""
    from ._whatif_parts import PARTS  # (not through aonkit.analysis: every command builds this parser)

    short = ", ".join(f"{s} ({name})" for name, (s, _) in PARTS.items())
    p.add_argument("input", help="a trace file or profile bundle, or a job's directory (its ranks on one clock, "
                   "collectives tied; opened lazily, each rank's cache written beside it as aonkit.load(dir, "
                   "lazy=True) does)")  # fmt: skip
    p.add_argument("--scale", action="append", default=[], metavar="PART=F",
                   help=f"scale a part of the work, e.g. gpu=0.5 (repeatable); parts: {short}")  # fmt: skip
    p.add_argument("--rule", action="append", default=[], metavar="JSON",
                   help='a rule as JSON, e.g. \'{"scale": 0.5, "name": "^aten::mm$"}\' (repeatable; fields of '
                        "aonkit.analysis.whatif_rules.Rule)")  # fmt: skip
    p.add_argument("--on", metavar="GPU", help="re-time the GPU work for another GPU, e.g. 'H200 SXM' "
                   "(aonkit.model.device_spec names; kernels by the two rooflines: whatif_hardware)")  # fmt: skip
    p.add_argument("--batch", type=float, metavar="K", help="re-time the GPU work for K times the measured batch "
                   "(parameters, optimizer and gradient collectives kept; whatif_batch)")  # fmt: skip
    p.add_argument("--batch-sweep", metavar="K,K,...", help="step time, throughput and the GPU's share of the "
                   "critical path at each batch multiple, e.g. 0.5,1,2,4,8 (whatif_batch.batch_sweep)")  # fmt: skip
    p.add_argument("--step", type=int, help="time one ProfilerStep#N (default: the whole trace)")
    p.add_argument("--scope", choices=("start", "launched"), default="start",
                   help="a step holds what starts in it (default) or its host work and the GPU work it launched")
    p.add_argument("--path", type=int, default=10, metavar="N", help="longest pieces of the critical path to list")
    p.add_argument("--salvage", action="store_true", help="keep the complete events of a truncated file")


def parse_rules(scales: list[str], rules: list[str]) -> list[Any]:
    """``--scale PART=F`` and ``--rule JSON`` as :class:`~aonkit.analysis.whatif_rules.Rule` objects.

    Raises
    ------
    AonkitError
        Naming the argument that is not a known part, a number, JSON or a rule.
    """
    from .analysis.whatif_rules import PARTS, Rule

    by_short = {s: rule for s, rule in PARTS.values()}
    out = []
    for text in scales:
        part, sep, value = text.partition("=")
        if not sep or part not in by_short:
            raise AonkitError(f"--scale {text!r}: give PART=F with PART one of {sorted(by_short)}")
        try:
            out.append(Rule(float(value), **by_short[part]))
        except ValueError:
            raise AonkitError(f"--scale {text!r}: {value!r} is not a number") from None
    for text in rules:
        try:
            spec = json.loads(text)
            out.append(Rule(**{**spec, "names": tuple(spec["names"])} if "names" in spec else spec))
        except (json.JSONDecodeError, TypeError, KeyError) as exc:
            raise AonkitError(f"--rule {text!r}: not a rule ({type(exc).__name__}: {exc}); e.g. "
                             '\'{"scale": 0.5, "kind": "gpu", "name": "gemm"}\'') from None  # fmt: skip
    return out


def _said(rule: Any) -> str:
    fields = {k: v for k, v in vars(rule).items() if k != "scale" and v is not None}
    if "names" in fields:
        fields["names"] = f"{len(fields['names'])} kernel names"
    return f"x{rule.scale:g} ({', '.join(f'{k}={v}' for k, v in fields.items()) or 'everything'})"


def run_whatif(args: argparse.Namespace) -> int:
    """Print the re-timed step time, speed-up, step periods and the critical path after the rules."""
    from .sources import load
    from .sources.bundle import is_bundle

    rules = parse_rules(args.scale, args.rule)
    path = Path(args.input)
    job = path.is_dir() and not is_bundle(path)  # a job's ranks, opened lazily (each rank's work in a worker)
    trace = load(path, salvage=args.salvage, lazy=job)
    try:
        return _report(args, path, trace, rules, job)
    finally:
        if job:
            trace.close()


def _report(args: argparse.Namespace, path: Path, trace: Any, rules: list[Any], job: bool) -> int:
    from .analysis.critical_path import composition, what_if
    from .units import fmt_ns

    hardware = []
    if args.on:
        from .analysis.whatif_hardware import hardware_rules, hardware_scales

        try:
            hardware = hardware_rules(hardware_scales(trace, args.on))
        except (KeyError, ValueError) as exc:  # an unknown GPU name, a trace whose GPU is unknown
            raise AonkitError(f"--on {args.on!r}: {str(exc).strip(chr(34) + chr(39))}") from None
    batch = []
    if args.batch is not None or args.batch_sweep:
        from .analysis.whatif_batch import batch_rules, batch_scales

        if args.batch_sweep:
            return _sweep(args, path, trace, [*hardware, *rules])
        try:
            batch = batch_rules(batch_scales(trace, args.batch))
        except ValueError as exc:  # a factor <= 0; costed kernels on a GPU the trace does not name
            raise AonkitError(f"--batch {args.batch:g}: {exc}") from None
    try:
        r = what_if(trace, [*hardware, *batch, *rules], step=args.step, scope=args.scope)
    except re.error as exc:
        raise AonkitError(f"--rule: a name pattern is not a regular expression ({exc})") from None
    where = "the whole trace" if args.step is None else f"ProfilerStep#{args.step} (scope {args.scope})"
    ranks = f", {len(trace)} ranks" if job else ""
    print(f"what-if: {path.name}{ranks}, {where}")
    for rule in rules:
        print(f"  rule {_said(rule)}")
    if args.on:
        print(f"  run on {args.on}: {sum(len(h.names or ()) for h in hardware)} kernel names re-timed by the "
              f"rooflines ({len(hardware)} distinct factors; aonkit.analysis.whatif_hardware)")  # fmt: skip
    if args.batch is not None:
        print(f"  batch x{args.batch:g}: {sum(len(b.names or ()) for b in batch)} kernel names re-timed by their "
              "work per sample (aonkit.analysis.whatif_batch)")  # fmt: skip
    print(f"measured {fmt_ns(r.measured_ns)}, model {fmt_ns(r.model_ns)} -> {fmt_ns(r.step_time_ns)}: "
          f"speed-up {r.speedup:.3f}x")  # fmt: skip
    if args.batch is not None and r.step_time_ns > 0:
        print(f"throughput (samples/s) x{args.batch * r.model_ns / r.step_time_ns:.3f}")
    after, before = r.periods_ns
    if after > 0 and before > 0:
        print(f"step period (median): {fmt_ns(before)} -> {fmt_ns(after)}: {before / after:.3f}x")
    comp = composition(r.critical_path)
    print("critical path after the rules:")
    for c in comp[comp["time_ns"] > 0].sort_values("time_ns", ascending=False).itertuples():
        print(f"  {c.part:<18} {fmt_ns(c.time_ns):>10}  {c.share:6.1%}")
    if args.path > 0:
        cp = r.critical_path
        top = cp.assign(t=cp["dur_ns"] + cp["wait_ns"]).nlargest(args.path, "t")
        print(f"its {len(top)} longest pieces (time + wait before):")
        for c in top.itertuples():
            name = str(c.name) if len(str(c.name)) <= 70 else str(c.name)[:67] + "..."
            print(f"  {c.part:<18} {fmt_ns(c.dur_ns):>10} {fmt_ns(c.wait_ns):>10}  {name}")
    return 0


def _sweep(args: argparse.Namespace, path: Path, trace: Any, rules: list[Any]) -> int:
    from .analysis.whatif_batch import batch_sweep
    from .units import fmt_ns

    try:
        factors = [float(f) for f in args.batch_sweep.split(",") if f.strip()]
        table = batch_sweep(trace, factors, step=args.step, scope=args.scope, rules=rules)
    except ValueError as exc:  # not numbers, a factor <= 0, an unknown GPU
        raise AonkitError(f"--batch-sweep {args.batch_sweep!r}: {exc}") from None
    where = "the whole trace" if args.step is None else f"ProfilerStep#{args.step} (scope {args.scope})"
    print(f"batch sweep: {path.name}, {where}")
    print(f"  {'batch':>7} {'step':>10} {'step x':>8} {'throughput x':>13} {'GPU share of the path':>22} "
          f"{'peak GPU memory':>24}")  # fmt: skip
    for row in table.itertuples():
        print(f"  {row.factor:>6g}x {fmt_ns(row.step_ns):>10} {row.step_ratio:>8.3f} {row.throughput_ratio:>13.3f} "
              f"{row.gpu_share:>22.1%} {_memory(row.peak_bytes, row.capacity_bytes):>24}")  # fmt: skip
    return 0


def _memory(peak: int, capacity: int) -> str:
    """``"25.9 of 85.0 GB"`` (``" OVER"`` past the capacity); ``"-"`` without memory events."""
    if peak < 0:
        return "-"
    if capacity <= 0:
        return f"{peak / 1e9:.1f} GB"
    return f"{peak / 1e9:.1f} of {capacity / 1e9:.1f} GB" + (" OVER" if peak > capacity else "")
