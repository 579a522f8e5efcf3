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


def changing_gpus() -> FakeNvml:
    """Two fake Hopper GPUs, GPU 1 in MIG mode with instances 1 and 2. When the file ``$AONKIT_TEST_MIG`` exists,
    GPU 1's instance 2 is destroyed; when ``$AONKIT_TEST_ADD`` exists, a third GPU is there (hot-plugged)."""
    import os
    from pathlib import Path

    destroyed, added = Path(os.environ["AONKIT_TEST_MIG"]), Path(os.environ["AONKIT_TEST_ADD"])

    class Changing(FakeNvml):
        def _now(self) -> None:  # the machine as the files say, before any answer
            if destroyed.exists():
                self.gpus[1].mig = [(1, 0)]
            if added.exists() and len(self.gpus) == 2:
                self.gpus.append(FakeGpu(index=2))

        def nvmlDeviceGetCount(self) -> int:  # noqa: N802 - pynvml's name
            self._now()
            return super().nvmlDeviceGetCount()

        def _enter(self, g: FakeGpu, fn: str) -> FakeGpu:
            self._now()
            return super()._enter(g, fn)

    return Changing([FakeGpu(), FakeGpu(mig=[(1, 0), (2, 0)])])
