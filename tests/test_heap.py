"""``freeze_heap``: the panels' kernel out of Python's full collections (run in a child: it changes the process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import gc, json
    from aonkit.widgets import ServingPanel, freeze_heap, unfreeze_heap
    panel = ServingPanel(n_requests=500)
    tracked = len(gc.get_objects())
    frozen = freeze_heap()
    left = len(gc.get_objects())  # what the collector's passes still walk
    a, b = [], []
    a.append(b); b.append(a)  # a cycle made after the freeze
    del a, b
    collected = gc.collect()
    panel.device.value = "A100 SXM4 80GB"  # the panel still answers
    answered = not panel.error and panel.replicas_for_slo() is not None
    unfreeze_heap()
    print(json.dumps({"tracked": tracked, "frozen": frozen, "left": left, "collected": collected,
                      "answered": answered, "after_unfreeze": gc.get_freeze_count()}))
""")


def test_freezing_leaves_the_collector_only_what_is_made_later_and_still_collects_it():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # THEN every object alive was frozen (a panel's kernel: over 100,000), the passes walk a few hundred, a cycle made
    # later is still collected, the panel answers, and unfreezing gives them back
    assert got["frozen"] > 100_000 and got["frozen"] >= 0.9 * got["tracked"]
    assert got["left"] < 2_000
    assert got["collected"] >= 2 and got["answered"]
    assert got["after_unfreeze"] == 0
