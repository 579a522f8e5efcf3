"""Make the README's screenshot from a real render: the HTML report of the bundled rank-0 sample in headless Chromium.

Writes ``docs/img/report.png`` (the top of the page: header, colour key, timeline, memory, summary cards). Needs
Playwright (``pip install -e .[test]``) and a Chromium (``AONKIT_CHROMIUM`` or ``chromium`` on the PATH); the
page is opened from a file with every network request refused.

Usage: ``python tools/readme_screenshot.py [--out docs/img/report.png] [--trace sample_traces/...]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def screenshot(trace_path: Path, out: Path, width: int = 1400, height: int = 980) -> Path:
    """Render the report of ``trace_path`` and save the top ``height`` pixels of the page as ``out``."""
    from playwright.sync_api import sync_playwright

    import aonkit
    from aonkit.report.html_report import write_report

    exe = os.environ.get("AONKIT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        raise SystemExit("no Chromium found: set AONKIT_CHROMIUM or install chromium")
    with tempfile.TemporaryDirectory() as d:
        page_path = write_report(aonkit.load(trace_path), Path(d) / "report.html", width_px=width - 160)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=ARGS)
            try:
                page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
                page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:", "blob:"))
                           else r.abort())  # fmt: skip
                page.goto(page_path.as_uri())
                page.wait_for_selector("canvas", timeout=60_000)
                page.wait_for_timeout(2500)  # the timeline's first level of detail and the cards draw
                out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(out), clip={"x": 0, "y": 0, "width": width, "height": height})
            finally:
                browser.close()
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "report.png")
    ap.add_argument("--trace", type=Path, default=ROOT / "sample_traces" / "gpu_synthetic_rank0.json.gz")
    args = ap.parse_args(argv)
    path = screenshot(args.trace, args.out)
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
