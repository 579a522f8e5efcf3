"""Shared fixtures and markers: real traces from ../shared, opt-in GPU tests."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import aonkit

ROOT = Path(__file__).resolve().parent.parent
# The suite tests the Numba parser everywhere; tests/test_quick_json.py tests the first-run quick reader
# against it (in "auto" mode a load would take either, depending on what is compiled).
os.environ.setdefault("AONKIT_QUICK_PARSE", "0")
# AONKIT_SHARED points the suite at another copy (or at a missing folder, to check that every user skips)
SHARED = Path(os.environ.get("AONKIT_SHARED") or ROOT.parent / "shared")
SHARED_TRACES = SHARED / "traces"
SAMPLE_TRACES = ROOT / "sample_traces"


def shared_trace_files() -> list[Path]:
    """Every trace file under ../shared/traces (empty when the folder is absent)."""
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(p for p in SHARED_TRACES.rglob("*") if p.is_file() and p.name != "SOURCES.md")


def require_shared(part: str = "traces") -> Path:
    """``../shared/<part>``, or skip the calling test with a clear reason when it is absent.

    Every test that reads ``../shared`` goes through here (or the
    ``shared_traces`` fixture), so a clone without it skips instead of failing.
    """
    path = SHARED / part
    if not path.exists():
        pytest.skip(f"shared test data not found at {path} (clone with ../shared beside the repo)")
    return path


def load_events(tmp_path: Path, events: list[dict]) -> aonkit.Trace:
    """Write ``events`` as a Kineto trace under ``tmp_path`` and load it."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return aonkit.load(path)


@pytest.fixture
def shared_traces() -> Path:
    return require_shared()


@pytest.fixture(scope="module")
def timeline_page():
    """A Chromium page running the canvas timeline's module (:mod:`tests.timeline_page`), one per test module."""
    from .timeline_page import open_page

    with open_page() as pg:
        yield pg


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261130)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        import pynvml

        pynvml.nvmlInit()
        has_gpu = pynvml.nvmlDeviceGetCount() > 0
    except Exception:
        has_gpu = False
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU with NVML (no GPU on this machine)")
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(skip_gpu)
