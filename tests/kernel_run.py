"""Run code cells in a real IPython kernel (nbclient) and return their outputs."""

from __future__ import annotations

import tempfile
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from .conftest import ROOT


def run_cells(*sources: str, timeout: int = 300, allow_errors: bool = False) -> list[list[dict]]:
    """Execute ``sources`` as the cells of a fresh notebook in a new kernel; outputs per cell.

    With ``allow_errors`` a cell that raises leaves an ``error`` output and the next cells still run.
    """
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    # ipc: local and owner-only, no TCP port. Its socket files go in a private temporary
    # folder (the default, ``kernel-ipc-N`` in the working directory, littered the checkout).
    with tempfile.TemporaryDirectory(prefix="aonkit-kernel-") as sockets:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "kernel-ipc"))
        NotebookClient(nb, km=km, timeout=timeout, allow_errors=allow_errors,
                       resources={"metadata": {"path": str(ROOT)}}).execute()
    return [c.outputs for c in nb.cells]


def text_of(outputs: list[dict]) -> str:
    """Concatenated stdout and text/plain of one cell's outputs."""
    parts = []
    for o in outputs:
        if o.get("output_type") == "stream":
            parts.append(o["text"])
        elif "data" in o:
            parts.append(o["data"].get("text/plain", ""))
    return "".join(parts)
