"""Op stacks as a tree of (parent node, name code), so a report stores each distinct stack prefix once.

A glyph's stack is a node; its text is the names on the path from the root,
joined with :data:`~aonkit.timeline.detail.STACK_SEPARATOR` (what
:func:`~aonkit.timeline.detail.stacks` returns for its event).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .detail import STACK_SEPARATOR


class StackTree:
    """Nodes ``(parent, name)`` added as events' stacks are (``parent_of``: enclosing event per row, -1 at the top).

    Parameters
    ----------
    parent_of : numpy.ndarray
        :attr:`~aonkit.timeline.index.TimelineIndex.parent_of`.
    name_code : numpy.ndarray
        Name code of every event (-1 when absent).
    """

    def __init__(self, parent_of: np.ndarray, name_code: np.ndarray) -> None:
        self.parent_of, self.name_code = parent_of, name_code
        self.parent = np.empty(0, np.int64)
        self.name = np.empty(0, np.int64)
        self._keys = pd.Index(np.empty(0, np.int64))
        self._width = int(name_code.max(initial=0)) + 2

    def _lookup(self, parent: np.ndarray, name: np.ndarray) -> np.ndarray:
        key = (parent + 1) * self._width + name + 1
        uniq, inv = np.unique(key, return_inverse=True)
        pos = self._keys.get_indexer(uniq)
        new = pos < 0
        pos[new] = len(self._keys) + np.arange(int(new.sum()))
        self._keys = self._keys.append(pd.Index(uniq[new]))
        self.parent = np.concatenate([self.parent, uniq[new] // self._width - 1])
        self.name = np.concatenate([self.name, uniq[new] % self._width - 1])
        return pos[inv.ravel()]

    def add(self, rows: np.ndarray) -> np.ndarray:
        """The node of each event's stack (the event and the events enclosing it); -1 where a row is -1."""
        chain = [np.asarray(rows, dtype=np.int64)]
        while (chain[-1] >= 0).any():
            chain.append(np.where(chain[-1] >= 0, self.parent_of[np.maximum(chain[-1], 0)], -1))
        node = np.full(len(chain[0]), -1, np.int64)
        for r in chain[-2::-1]:
            ok = r >= 0
            node[ok] = self._lookup(node[ok], self.name_code[r[ok]])
        return node

    def truncate(self, n: int) -> None:
        """Forget the nodes from ``n`` on (added for a level that was not kept)."""
        self.parent, self.name, self._keys = self.parent[:n], self.name[:n], self._keys[:n]


def stack_texts(parent: np.ndarray, name: np.ndarray, names: list[str], nodes: np.ndarray) -> list[str]:
    """Text of each of ``nodes`` (``""`` for -1); ``name`` indexes ``names``."""
    memo: dict[int, str] = {}

    def text(n: int) -> str:
        path = []
        while n >= 0 and n not in memo:
            path.append(n)
            n = int(parent[n])
        out = memo.get(n)  # None above a root
        for m in reversed(path):
            out = memo[m] = names[name[m]] if out is None else out + STACK_SEPARATOR + names[name[m]]
        return "" if out is None else out

    return [text(int(n)) for n in nodes]
