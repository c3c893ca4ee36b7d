"""Test configuration: the device under test and the `portable` marker.

Tests that take the ``device`` fixture are device-agnostic: they are marked ``portable`` and run
on the device named by ``NEURALODE_TF_TEST_DEVICE`` (``cpu`` by default, ``cuda`` in the
``tests_gpu`` nox session, ``xla`` in ``tests_tpu``).
"""

from __future__ import annotations

import os

import pytest
import torch

DEVICE = os.environ.get("NEURALODE_TF_TEST_DEVICE", "cpu")

# The tests use small tensors, for which one thread is as fast as several, and several OpenMP threads
# on a busy 2-core machine spin against each other (a 50-step rk4 solve took 16 s with 2 threads
# under load and 0.06 s with 1).
torch.set_num_threads(int(os.environ.get("NEURALODE_TF_TEST_THREADS", "1")))


def _device() -> torch.device:
    if DEVICE == "xla":
        import torch_xla

        return torch_xla.device()
    if DEVICE == "cuda" and not torch.cuda.is_available():
        pytest.skip("NEURALODE_TF_TEST_DEVICE=cuda but CUDA is not available")
    return torch.device(DEVICE)


@pytest.fixture
def device() -> torch.device:
    return _device()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "device" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.portable)
        if item.get_closest_marker("gpu") and not torch.cuda.is_available():
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def pytest_report_header(config: pytest.Config) -> str:
    return f"neuralode_tf device under test: {DEVICE} (NEURALODE_TF_TEST_DEVICE)"
