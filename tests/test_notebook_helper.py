"""The notebooks' setup helper (neuralode_tf.notebook): the library's warnings stay visible after it, only named
third-party noise is silenced, the core package does not load it, and the preset flag and work folder."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import neuralode_tf
from neuralode_tf.notebook import NotebookSettings, setup
from neuralode_tf.numerics import CausalityWarning

pytestmark = pytest.mark.cpu_only("notebook preamble: warning filters, environment, folders and subprocesses")


@pytest.fixture
def sandbox(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """``setup()`` changes process-wide state: keep it to this test (warning filters, torch threads, the
    temporary directory it makes the work folder in, the working directory it finds recordings from)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NEURALODE_TF_FULL", raising=False)
    threads = torch.get_num_threads()
    with warnings.catch_warnings():
        warnings.resetwarnings()  # Python's defaults, not pytest's, so that setup's own filters decide
        yield tmp_path
    torch.set_num_threads(threads)


def _shown(category: type[Warning], module: str, message: str = "something is off") -> bool:
    """Whether a warning raised from ``module`` would be shown under the filters in place."""
    with warnings.catch_warnings(record=True) as caught:  # keeps the filters in place, records what they let through
        warnings.warn_explicit(message, category, f"{module.replace('.', '/')}.py", 1, module=module, registry={})
    return len(caught) == 1


def test_library_warnings_stay_visible(sandbox: Path) -> None:
    setup()
    assert _shown(CausalityWarning, "neuralode_tf.numerics.causality")
    for category in (UserWarning, FutureWarning, DeprecationWarning, RuntimeWarning):
        assert _shown(category, "neuralode_tf.train.loop"), category
    assert _shown(UserWarning, "__main__")  # a notebook cell's own warnings


def test_real_causality_warning_is_shown(sandbox: Path) -> None:
    """An adaptive solve of a causal field, through the public API: the warning reaches the notebook."""

    class Causal(torch.nn.Module):
        causal = True

        def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return -y

    setup()
    with warnings.catch_warnings(record=True) as caught:
        neuralode_tf.solve(Causal(), torch.ones(1, 3, 2), [0.0, 1.0], method="dopri5", rtol=1e-4, atol=1e-4)
    assert any(issubclass(w.category, CausalityWarning) for w in caught)


def test_only_named_third_party_noise_is_silenced(sandbox: Path) -> None:
    setup()
    jit = "`torch.jit.script` is deprecated. Please switch to `torch.compile` or `torch.export`."
    assert not _shown(FutureWarning, "torch.jit._script", jit)
    assert _shown(FutureWarning, "torch.jit._script", "another deprecation")  # by message, not by module
    assert _shown(FutureWarning, "neuralode_tf.models.frontends.vit", jit)  # by module, not by message
    for module in ("torch", "timm.layers", "torch_geometric.nn"):
        assert _shown(UserWarning, module)


def test_setup_twice_adds_no_filters(sandbox: Path) -> None:
    setup()
    filters = list(warnings.filters)
    setup()
    assert warnings.filters == filters


def test_core_import_does_not_load_the_helper() -> None:
    code = (
        "import sys, neuralode_tf\n"
        "loaded = sorted(m for m in ('neuralode_tf.notebook', 'matplotlib') if m in sys.modules)\n"
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(("value", "full"), [(None, False), ("", False), ("0", False), ("1", True)])
def test_full_flag(sandbox: Path, monkeypatch: pytest.MonkeyPatch, value: str | None, full: bool) -> None:
    if value is not None:
        monkeypatch.setenv("NEURALODE_TF_FULL", value)
    assert setup().full is full


@pytest.mark.parametrize("value", ["true", "yes", "2", " 1"])
def test_full_flag_refuses_other_values(sandbox: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("NEURALODE_TF_FULL", value)
    with pytest.raises(ValueError, match="NEURALODE_TF_FULL"):
        setup()


def test_work_folder_is_fresh(sandbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = sandbox / "tmp" / "tutorial99" / "quick" / "old_run"
    stale.mkdir(parents=True)
    settings = setup(work="tutorial99")
    assert settings.work == sandbox / "tmp" / "tutorial99" / "quick"
    assert settings.work.is_dir() and not any(settings.work.iterdir())
    monkeypatch.setenv("NEURALODE_TF_FULL", "1")
    assert setup(work="tutorial99").work == sandbox / "tmp" / "tutorial99" / "full"
    assert setup().work is None


def test_threads_seed_recordings_and_versions_line(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (sandbox / "paper_repro").mkdir()
    (sandbox / "experiments" / "demo").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="paper_repro"):
        setup(experiment="demo")  # from the repository root, not from paper_repro/
    monkeypatch.chdir(sandbox / "paper_repro")
    capsys.readouterr()
    torch.set_num_threads(2)
    settings = setup(versions=("numpy",), seed=3, experiment="demo")
    drawn = torch.rand(2)
    torch.manual_seed(3)
    assert torch.equal(drawn, torch.rand(2))
    assert torch.get_num_threads() == 1
    assert settings == NotebookSettings(
        full=False, start=settings.start, work=None, recorded=Path("../experiments/demo")
    )
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"neuralode_tf {neuralode_tf.__version__}, torch {torch.__version__}, numpy ")
    assert line.endswith("FULL=False")
