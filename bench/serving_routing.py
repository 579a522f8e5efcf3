"""How long ``ServingPanel`` takes to answer a change under each routing, with many replicas and a high load.

Usage: ``PYTHONPATH=. python bench/serving_routing.py [--repeats 3] [--kernel MODULE] [--kv-policy paged]``.

For each (replicas, rate) setting and routing, a panel (its defaults otherwise: Llama-3 8B on one H100, 20,000
requests per simulation, the sweep's rates around the chosen one) is made, and its device is changed to each of
four others: each change runs the sweep and the replica search again (no row kept from before: a panel keeps the
rows of settings it has seen, so no value is set twice). The panel's own ``update_s`` of each change is collected;
the median and the worst per routing, in ms (from Python: the simulations and the figures' data, no page). The
panel's first evaluation, which may compile or load the Numba cache, is not counted.

``--kernel aonkit._kernels.zz_old`` runs a copy of the simulation kernel instead (a module with the same
``simulate``), alternated with the installed one: for comparing a kernel change on a noisy machine.

Prints markdown; writes no file.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aonkit._kernels.serving as kernel  # noqa: E402
from aonkit.widgets.serving import ServingPanel  # noqa: E402

SETTINGS = ((4, 20.0), (16, 20.0), (64, 20.0), (16, 80.0), (64, 80.0))
ROUTINGS = ("central", "jsq", "round_robin")
DEVICES = ("A100 SXM4 80GB", "H200 SXM", "B200", "MI300X")


def changes(panel: ServingPanel) -> list[float]:
    """Times (s) of the device changed to each of ``DEVICES`` in turn."""
    out = []
    for dev in DEVICES:
        panel.device.value = dev
        out.append(panel.update_s)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kernel", help="a module with a variant `simulate`, alternated with the installed one")
    ap.add_argument("--kv-policy", default="reserve", choices=("reserve", "paged"), help="the panels' KV cache")
    a = ap.parse_args()
    kernels = {"installed": kernel.simulate}
    if a.kernel:
        kernels = {a.kernel.rsplit(".", 1)[-1]: importlib.import_module(a.kernel).simulate, **kernels}
    missing = [d for d in DEVICES if d not in ServingPanel().devices]
    if missing:
        raise SystemExit(f"devices not in aonkit.model.hardware.devices(): {missing}")
    head = " | ".join(f"{name} {r}: median / worst" for r in ROUTINGS for name in kernels)
    print(f"| replicas | rate /s | {head} |")
    print("|---:|---:|" + "---:|" * (len(ROUTINGS) * len(kernels)))
    for replicas, rate in SETTINGS:
        cells = []
        for routing in ROUTINGS:
            got: dict[str, list[float]] = {name: [] for name in kernels}
            for _ in range(a.repeats):
                for name, fn in kernels.items():
                    kernel.simulate = fn
                    panel = ServingPanel(rate_per_s=rate, replicas=replicas, routing=routing,
                                         kv_policy=a.kv_policy)  # (its first evaluation is not counted)
                    got[name] += changes(panel)
            cells += [f"{1e3 * statistics.median(v):.0f} / {1e3 * max(v):.0f}" for v in got.values()]
        print(f"| {replicas} | {rate:g} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
