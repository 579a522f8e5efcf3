"""Shared fixtures and markers: real traces from ../shared, opt-in GPU tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
SHARED_TRACES = SHARED / "traces"
SAMPLE_TRACES = ROOT / "sample_traces"


def shared_trace_files() -> list[Path]:
    """Every trace file under ../shared/traces (empty when the folder is absent)."""
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(p for p in SHARED_TRACES.rglob("*") if p.is_file() and p.name != "SOURCES.md")


def require_shared() -> Path:
    """Skip the calling test with a clear reason when ../shared/traces is absent."""
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"shared test traces not found at {SHARED_TRACES} (clone with ../shared beside the repo)")
    return SHARED_TRACES


@pytest.fixture
def shared_traces() -> Path:
    return require_shared()


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
