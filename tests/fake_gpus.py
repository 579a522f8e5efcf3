"""Factories for ``AONKIT_FAKE_NVML=tests.fake_gpus:two_gpus``: the daemon samples these fake GPUs (no driver)."""

from __future__ import annotations

from tests.fake_nvml import FakeGpu, FakeNvml


def two_gpus() -> FakeNvml:
    """Two fake Hopper GPUs."""
    return FakeNvml([FakeGpu(), FakeGpu()])


def eight_gpus() -> FakeNvml:
    """Eight fake Hopper GPUs (bench/daemon.py)."""
    return FakeNvml([FakeGpu() for _ in range(8)])


def no_driver() -> FakeNvml:
    """An NVML whose init fails as it does without a driver: the daemon samples the host only."""
    import pynvml

    return FakeNvml([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)


def stale_library() -> FakeNvml:
    """An NVML whose init says the library and the driver differ in version (a broken install, or an upgrade)."""
    import pynvml

    return FakeNvml([], init_error=pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)


def hanging_gpus() -> FakeNvml:
    """Two fake Hopper GPUs whose utilization read blocks while the file ``$AONKIT_TEST_HANG`` exists (a GPU that
    fell off the bus can hold an NVML call that long)."""
    import os
    import time
    from pathlib import Path

    flag = Path(os.environ["AONKIT_TEST_HANG"])

    class Hanging(FakeNvml):
        def nvmlDeviceGetUtilizationRates(self, g: FakeGpu):  # noqa: ANN201, N802 - pynvml's name
            while flag.exists():
                time.sleep(0.02)
            return super().nvmlDeviceGetUtilizationRates(g)

    return Hanging([FakeGpu(), FakeGpu()])
