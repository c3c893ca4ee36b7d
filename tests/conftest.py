"""Test configuration: the device under test, and which tests run on it.

Every test declares where it can run:

* a test that takes the ``device`` fixture is device-agnostic: it is marked ``portable`` and runs on
  the device named by ``NEURALODE_TF_TEST_DEVICE`` (``cpu`` by default, ``cuda`` in the ``tests_gpu``
  nox session, ``xla`` in ``tests_tpu``). It builds its modules and tensors on ``device`` (or moves
  them there), so that library code which forgets a ``device=`` fails it;
* a test marked ``cpu_only("why")`` measures or drives something only the CPU has (process memory,
  signals to a subprocess, file readers, the CLI). Under another device it is skipped with that
  reason, so the device sessions list what they did not run and why.

A test that does neither is a collection error. Under a device session, the end of the run prints
how many tests ran on the device.

With ``NEURALODE_TF_XLA_EAGER=1`` (set by ``tests_tpu`` on XLA's CPU backend) torch_xla runs in eager
mode: every op is compiled once per shape and run at once, rather than traced into whole-solve graphs.

Property-based tests (Hypothesis) use the profile named by ``HYPOTHESIS_PROFILE``: ``ci`` (the default: few
examples, derandomised, so the suite stays quick and reproducible) or ``thorough`` (many random examples;
``nox -s fuzz``).
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("thorough", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

DEVICE = os.environ.get("NEURALODE_TF_TEST_DEVICE", "cpu")

# The tests use small tensors, for which one thread is as fast as several, and several OpenMP threads
# on a busy 2-core machine spin against each other (a 50-step rk4 solve took 16 s with 2 threads
# under load and 0.06 s with 1).
torch.set_num_threads(int(os.environ.get("NEURALODE_TF_TEST_THREADS", "1")))


def _device() -> torch.device:
    if DEVICE == "xla":
        import torch_xla
        from torch_xla.experimental import eager_mode

        eager_mode(os.environ.get("NEURALODE_TF_XLA_EAGER", "0") == "1")
        return torch_xla.device()
    if DEVICE == "cuda" and not torch.cuda.is_available():
        pytest.skip("NEURALODE_TF_TEST_DEVICE=cuda but CUDA is not available")
    return torch.device(DEVICE)


@pytest.fixture(scope="session")
def device() -> torch.device:
    return _device()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    undeclared = []
    for item in items:
        cpu_only = item.get_closest_marker("cpu_only")
        if "device" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.portable)
        elif cpu_only is not None:
            reason = cpu_only.args[0] if cpu_only.args else cpu_only.kwargs.get("reason", "")
            if not reason:
                undeclared.append(f"{item.nodeid}: cpu_only needs a reason")
            elif DEVICE != "cpu":
                item.add_marker(pytest.mark.skip(reason=f"CPU only: {reason}"))
        else:
            undeclared.append(f"{item.nodeid}: takes no `device` fixture and is not marked cpu_only(reason)")
        if item.get_closest_marker("gpu") and not torch.cuda.is_available():
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
    if undeclared:
        raise pytest.UsageError("every test declares where it runs:\n  " + "\n  ".join(undeclared))


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def pytest_report_header(config: pytest.Config) -> str:
    return f"neuralode_tf device under test: {DEVICE} (NEURALODE_TF_TEST_DEVICE)"


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Under a device session: how many of the collected tests ran (passed) on the device."""
    if DEVICE == "cpu":
        return
    stats = terminalreporter.stats
    passed = len([r for r in stats.get("passed", []) if r.when == "call"])
    skipped = len(stats.get("skipped", []))
    failed = len([r for r in stats.get("failed", []) if r.when == "call"])
    total = terminalreporter._numcollected
    share = 100.0 * passed / total if total else 0.0
    terminalreporter.write_line(
        f"device coverage on {DEVICE}: {passed} of {total} tests passed on the device ({share:.0f}%), "
        f"{skipped} skipped (reasons above), {failed} failed"
    )
