"""A notebook run in a real JupyterLab in headless Chromium, for the benches that time what a page does.

Uses the tests' helpers (``tests/browser.py``: the system Chromium, network closed; Run All as a person does).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def notebook_page(cells: list[str], name: str = "bench.ipynb") -> Iterator[Any]:
    """A page where a notebook of ``cells`` ran by Run All without an error (the process exits otherwise)."""
    from tests.browser import browser_page, jupyter_lab
    from tests.test_gallery_browser import run_all

    nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c}
                    for c in cells],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="aonb-") as tmp:
        root = Path(tmp)
        (root / "notebooks").mkdir()
        (root / "notebooks" / name).write_text(json.dumps(nb))
        with jupyter_lab(root) as server:
            base, token = server.split("|")
            with browser_page(allow_hosts=(base,)) as (page, _blocked):
                state = run_all(page, base, token, name)
                if not all(c["count"] and not c["errors"] for c in state["cells"]):
                    sys.exit(f"{name} did not run: {state}")
                yield page


def page_metrics(cdp: Any) -> dict[str, float]:
    """Chrome's ``Performance.getMetrics`` of a page's CDP session (enabled by the caller), by name (seconds)."""
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
