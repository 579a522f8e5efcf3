"""Random walks over a panel's controls, for the tests that every change is answered or refused with a reason."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any


def random_changes(panel: Any, values: Mapping[str, Sequence[Any]], seed: int, n: int = 60) -> Iterator[str]:
    """Set ``n`` controls of ``panel`` drawn at random (by name) to values drawn from ``values``; yield each name."""
    rnd = random.Random(seed)
    for _ in range(n):
        name = rnd.choice(sorted(values))
        getattr(panel, name).value = rnd.choice(values[name])
        yield name
