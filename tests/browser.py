"""Headless Debian Chromium through Playwright, with the network closed, for what a person sees."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-default-apps"]
MARKUP = '<img src=x onerror="window.__xss=1">'
"""An event name that runs script if anything renders it as HTML."""


def chromium_path() -> str:
    """The system Chromium (``.ci/run`` installs Debian's); skip the test when absent."""
    exe = os.environ.get("AONKIT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.skip("Debian chromium is not installed here (.ci/run installs it: apt-get install chromium)")
    return exe


@contextmanager
def browser_page(allow_hosts: tuple[str, ...] = ()) -> Iterator[tuple[Any, list[str]]]:
    """A page whose requests to anything but ``file:``, ``data:``, ``blob:`` and ``allow_hosts`` are refused.

    Yields (page, blocked URLs); the page also records console errors, warnings
    and dialogs in ``page.aonkit_errors`` / ``page.aonkit_warnings`` / ``page.aonkit_dialogs``.
    """
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is a test dependency (.[test])")
    exe = chromium_path()
    blocked: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.aonkit_errors, page.aonkit_dialogs, page.aonkit_warnings = [], [], []
            page.on("console", lambda m: m.type == "error" and page.aonkit_errors.append(m.text))
            page.on("console", lambda m: m.type == "warning" and page.aonkit_warnings.append(m.text))
            page.on("pageerror", lambda e: page.aonkit_errors.append(f"page error: {e}"))
            page.on("dialog", lambda d: (page.aonkit_dialogs.append(d.message), d.dismiss()))

            def route(r: Any) -> None:
                url = r.request.url
                if url.startswith(("file:", "data:", "blob:")) or any(url.startswith(h) for h in allow_hosts):
                    r.continue_()
                else:
                    blocked.append(url)
                    r.abort()

            page.route("**/*", route)
            yield page, blocked
        finally:
            browser.close()


def not_blank(png: bytes) -> float:
    """Standard deviation of a screenshot's grey levels (0 for a blank image). Pillow comes with bokeh."""
    import io

    from PIL import Image

    return float(np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=np.float64).std())


def color_pixels(png: bytes, color: str, tolerance: int = 40) -> int:
    """Pixels of a screenshot within ``tolerance`` (each of R, G, B) of ``color`` (``"#rrggbb"``)."""
    import io

    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)
    want = np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.int16)
    return int((np.abs(rgb - want).max(axis=-1) <= tolerance).sum())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def jupyter_lab(root: Path, timeout_s: float = 90.0) -> Iterator[str]:
    """A JupyterLab server on 127.0.0.1 serving ``root``; yields its base URL with the token."""
    if shutil.which("jupyter-lab") is None and shutil.which("jupyter") is None:
        pytest.skip("jupyterlab is not installed (pip install -e .[test])")
    port, token = free_port(), os.urandom(12).hex()
    settings = root / ".lab-settings"  # the tests' own settings: no news pop-up over the screenshots
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True, exist_ok=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}')
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0",
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--KernelManager.transport=ipc", "--LabApp.extension_manager=readonly",
           "--LabApp.expose_app_in_browser=True",
           f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={settings / 'workspaces'}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # CI containers run as root
    log = open(root / "lab.log", "w")  # noqa: SIM115 - closed below
    repo = str(Path(__file__).resolve().parent.parent)  # the kernel imports this checkout's aonkit
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=root, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start:\n" + (root / "lab.log").read_text()[-3000:]) from None
                time.sleep(0.5)
        yield f"{base}|{token}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
