"""``aonkit step-times``: an engine's forward passes in a trace, and the serving model's step times fitted to them.

A shell over :func:`aonkit.analysis.forward_passes` and :func:`aonkit.model.fit_step_time`.
"""

from __future__ import annotations

import argparse

from .errors import AonkitError


def add_step_time_arguments(p: argparse.ArgumentParser) -> None:
    """The ``step-times`` subcommand's arguments."""
    p.add_argument("input", help="a trace of an engine generating, recorded with record_shapes=True")
    p.add_argument("--time", choices=("dur", "interval"), default="dur",
                   help="fit each pass's own span (default) or the time to the next pass's start")  # fmt: skip
    p.add_argument("--skip", type=int, default=0, metavar="N", help="leave the first N passes out (warm-up)")
    p.add_argument("--vocab", type=int, help="rows of the token embedding table, when another table is picked")
    p.add_argument("--csv", metavar="FILE", help="write the passes, with the fitted and measured seconds, as CSV")
    p.add_argument("--salvage", action="store_true", help="keep the complete events of a truncated file")


def run_step_times(args: argparse.Namespace) -> int:
    """Print the passes found and the fitted step times; write the CSV when asked."""
    from .analysis import forward_passes
    from .model import fit_step_time
    from .sources import load

    trace = load(args.input, salvage=args.salvage)
    passes = forward_passes(trace, vocab=args.vocab)
    if not len(passes):
        raise AonkitError(f"{args.input}: no forward pass found (no aten::embedding with recorded shapes: record "
                          "the trace with record_shapes=True)")  # fmt: skip
    kinds = passes["kind"].astype(str).value_counts()
    print(f"{len(passes)} forward passes: " + ", ".join(f"{kinds.get(k, 0)} {k}" for k in ("prefill", "decode",
                                                                                          "unknown")))  # fmt: skip
    used = passes.iloc[args.skip:]
    try:
        fit = fit_step_time(used, time=f"{args.time}_ns")
    except ValueError as exc:
        raise AonkitError(f"{args.input}: {exc}") from None
    print(fit.text())
    if args.csv:
        out = used.merge(fit.residuals[["pass_id", "measured_s", "fitted_s", "residual_s"]], on="pass_id", how="left")
        out.to_csv(args.csv, index=False)
        print(f"wrote {args.csv} ({len(out)} passes)")
    return 0
