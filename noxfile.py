"""nox sessions for neuralode_tf.

Two ways to run them:

* In an environment that is already provisioned (``pip install -e ".[all]"``), with ``--no-venv``::

      nox --no-venv -s tests notebooks lint

  Nothing is installed; every tool runs with the interpreter nox itself runs under
  (``sys.executable -m ...``), so ``.venv/bin`` need not be on ``PATH``.

* Without ``--no-venv``: each session creates (and reuses) its own virtualenv under ``.nox/`` and
  installs the package with the extras it needs.

``tests_gpu`` and ``tests_tpu`` are opt-in (``nox -s tests_gpu``, ``nox -s tests_tpu``).
``tests_tpu`` always needs its own virtualenv (torch_xla 2.9 pins torch 2.9), so it refuses
``--no-venv`` unless ``torch_xla`` is already importable in the current environment.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from pathlib import Path

import nox

nox.options.sessions = ["tests", "notebooks", "lint"]
nox.options.reuse_venv = "yes"

ROOT = Path(__file__).resolve().parent

# torch_xla's newest release; it must be paired with a torch of the same minor version.
TORCH_XLA_VERSION = "2.9.0"
TORCH_FOR_XLA = "2.9.*"


def _no_venv(session: nox.Session) -> bool:
    """True under ``nox --no-venv`` (or ``--force-venv-backend none``)."""
    return session.venv_backend == "none"


def _python(session: nox.Session) -> str:
    """The interpreter that runs tools: nox's own one without a venv, the venv's ``python`` otherwise."""
    return sys.executable if _no_venv(session) else "python"


def _install(session: nox.Session, *args: str) -> None:
    """``session.install`` unless running with ``--no-venv`` in a provisioned environment."""
    if _no_venv(session):
        session.log(f"--no-venv: not installing {' '.join(args)} (using the current environment)")
        return
    session.install(*args)


def _pytest(session: nox.Session, *args: str, env: dict[str, str] | None = None) -> None:
    # success_codes default to [0]: pytest's 5 ("no tests collected") fails the session.
    session.run(_python(session), "-m", "pytest", *args, *session.posargs, env=env or {})


@nox.session(reuse_venv=True)
def tests(session: nox.Session) -> None:
    """CPU test suite (pytest on tests/)."""
    _install(session, "-e", ".[dev,vision,graph,data]")
    _pytest(session, "tests")


@nox.session(reuse_venv=True)
def tests_gpu(session: nox.Session) -> None:
    """The whole suite with CUDA as the device under test (skips when there is no CUDA GPU).

    Tests that take the ``device`` fixture run on CUDA; ``cpu_only`` tests are skipped with their reason.
    """
    if shutil.which("nvidia-smi") is None:
        session.skip("no NVIDIA GPU: nvidia-smi not found")
    _install(session, "-e", ".[dev,vision,graph,data]")
    has_cuda = session.run(_python(session), "-c", "import torch; print(torch.cuda.is_available())", silent=True)
    if not isinstance(has_cuda, str) or has_cuda.strip().splitlines()[-1] != "True":
        session.skip("torch.cuda.is_available() is False in this environment")
    _pytest(session, "tests", env={"NEURALODE_TF_TEST_DEVICE": "cuda"})


def _pjrt_device() -> str:
    """``PJRT_DEVICE`` for torch_xla: the caller's setting, TPU if one is visible, else CPU."""
    if os.environ.get("PJRT_DEVICE"):
        return os.environ["PJRT_DEVICE"]
    tpu_visible = (
        glob.glob("/dev/accel*")  # TPU v2-v4 VMs
        or glob.glob("/dev/vfio/[0-9]*")  # TPU v5e/v5p/v6e VMs
        or os.environ.get("TPU_ACCELERATOR_TYPE")
        or os.environ.get("TPU_NAME")
    )
    return "TPU" if tpu_visible else "CPU"


@nox.session(reuse_venv=True)
def tests_tpu(session: nox.Session) -> None:
    """The whole suite with an XLA device under test: a TPU if present, else XLA's CPU backend (PJRT_DEVICE=CPU).

    Tests that take the ``device`` fixture run on XLA; ``cpu_only`` tests, and tests that need an op
    XLA does not lower, are skipped with the reason. Needs its own virtualenv with torch 2.9 + torch_xla
    2.9 (not the project's main torch).
    """
    pjrt = _pjrt_device()
    if _no_venv(session):
        probe = session.run(
            sys.executable,
            "-c",
            "import importlib.util as u; print(u.find_spec('torch_xla') is not None)",
            silent=True,
        )
        if not isinstance(probe, str) or probe.strip().splitlines()[-1] != "True":
            session.error(
                "tests_tpu needs its own virtualenv (torch=="
                f"{TORCH_FOR_XLA} + torch_xla=={TORCH_XLA_VERSION}), but nox was run with --no-venv and "
                "torch_xla is not installed in the current environment. Run it without --no-venv: "
                "`nox -s tests_tpu`"
            )
    else:
        xla = f"torch_xla[tpu]=={TORCH_XLA_VERSION}" if pjrt == "TPU" else f"torch_xla=={TORCH_XLA_VERSION}"
        # One resolver call so that -e . (torch>=2.9) cannot pull a newer torch than torch_xla allows.
        session.install(f"torch=={TORCH_FOR_XLA}", xla, "-e", ".[dev,vision,graph,data]")
    env = {"NEURALODE_TF_TEST_DEVICE": "xla", "PJRT_DEVICE": pjrt}
    session.log(f"PJRT_DEVICE={pjrt}")
    # Fail early, with a short message, if torch_xla cannot run at all here.
    session.run(
        _python(session),
        "-c",
        "import torch, torch_xla; d = torch_xla.device(); "
        "print('torch', torch.__version__, 'torch_xla', torch_xla.__version__, 'device', d, "
        "'check', torch.ones(3, device=d).sum().item())",
        env=env,
    )
    _pytest(session, "tests", env=env)


def _notebook_dirs() -> list[Path]:
    return [ROOT / "tutorials", ROOT / "paper_repro"]


def _percent_sources(folder: Path) -> list[Path]:
    """py:percent notebook sources in ``folder`` (files with ``# %%`` cell markers)."""
    found = []
    for path in sorted(folder.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if any(line.startswith("# %%") for line in text.splitlines()):
            found.append(path)
    return found


@nox.session(reuse_venv=True)
def notebooks(session: nox.Session) -> None:
    """Regenerate .ipynb from the py:percent sources (keeping stored outputs) and run them with nbval."""
    _install(session, "-e", ".[dev,vision,graph,data,docs]")
    python = _python(session)
    sources = [p for folder in _notebook_dirs() if folder.is_dir() for p in _percent_sources(folder)]
    if not sources:
        session.error("no py:percent notebook sources found in tutorials/ (or paper_repro/)")
    session.run(python, "-m", "jupytext", "--to", "ipynb", "--update", *(str(p.relative_to(ROOT)) for p in sources))
    targets = [
        str(folder.relative_to(ROOT)) for folder in _notebook_dirs() if folder.is_dir() and any(folder.glob("*.ipynb"))
    ]
    args = ["--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout=600"]
    sanitize = ROOT / "tutorials" / "nbval_sanitize.cfg"
    if sanitize.is_file():
        args += ["--nbval-sanitize-with", str(sanitize.relative_to(ROOT))]
    _pytest(session, *args, *targets)


@nox.session(reuse_venv=True)
def lint(session: nox.Session) -> None:
    """ruff check (formatting is not enforced)."""
    _install(session, "ruff")
    session.run(_python(session), "-m", "ruff", "check", ".")


@nox.session(reuse_venv=True)
def bench(session: nox.Session) -> None:
    """The performance suite and the TransEvolve benchmark (``benchmarks/``); writes benchmarks/results/*.json.

    Extra arguments go to the suite, e.g. ``nox -s bench -- --quick``.
    """
    _install(session, "-e", ".[dev,vision,data]")
    python = _python(session)
    env = {"OMP_NUM_THREADS": "2"}
    session.run(python, "-m", "benchmarks.suite", *session.posargs, env=env)
    session.run(python, "-m", "benchmarks.transevolve", *(["--quick"] if "--quick" in session.posargs else []), env=env)

