"""The parts of the work a what-if rule scales, apart from the rules: the CLI's help reads them without pandas."""

from __future__ import annotations

PARTS: dict[str, tuple[str, dict[str, str]]] = {
    "GPU computation": ("gpu", {"kind": "gpu", "gpu_class": "computation"}),
    "GPU communication": ("comm", {"kind": "gpu", "gpu_class": "communication"}),
    "GPU copies": ("copies", {"kind": "gpu", "gpu_class": "memory"}),
    "launch calls": ("launch", {"kind": "cpu", "name": r"(cuda|hip|cu)\w*Launch"}),
    "other CPU time": ("cpu", {"kind": "cpu", "name": r"^(?!(cuda|hip|cu)\w*Launch)"}),
    "host gaps": ("gaps", {"kind": "gap"}),
}
"""The common parts of the work a rule scales: name -> (short name, the rule's conditions); ``WhatIfPanel``'s
sliders and ``aonkit what-if --scale`` use them."""
