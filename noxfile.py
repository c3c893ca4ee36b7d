"""nox sessions for neuralode_tf.

Two ways to run them:

* In an environment that is already provisioned (``pip install -e ".[all]"``), with ``--no-venv``::

      nox --no-venv -s tests claims notebooks lint

  Nothing is installed; every tool runs with the interpreter nox itself runs under
  (``sys.executable -m ...``), so ``.venv/bin`` need not be on ``PATH``.

* Without ``--no-venv``: each session creates (and reuses) its own virtualenv under ``.nox/`` and
  installs the package with the extras it needs.

``tests_gpu`` and ``tests_tpu`` are opt-in (``nox -s tests_gpu``, ``nox -s tests_tpu``).
``tests_tpu`` always needs its own virtualenv (torch_xla 2.9 pins torch 2.9), so it refuses
``--no-venv`` unless ``torch_xla`` is already importable in the current environment.

``tests_oldest`` (opt-in, ``nox -s tests_oldest``; extra arguments go to pytest) tests the lower bounds
of pyproject.toml: it builds the sdist and wheel, installs the wheel with its extras pinned by
``constraints/oldest.txt`` (every dependency at its lower bound: torch 2.9.0, ...), and runs a copy of
tests/ from a temporary folder, so that the installed wheel is what the suite imports; then a small
notebook through jupytext and nbval, ``nox --list`` and ``ruff check`` with the oldest docs and dev tools.
It refuses ``--no-venv``. The first run downloads torch 2.9.0 (a CUDA build from PyPI, about 3 GB with
its libraries) and takes about 10 minutes to install.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from pathlib import Path

import nox

nox.options.sessions = ["tests", "claims", "notebooks", "lint"]
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
def fuzz(session: nox.Session) -> None:
    """The Hypothesis property tests (tests/test_fuzz_*.py) with many random examples each.

    The ``tests`` session runs them too, with the quick, derandomised ``ci`` profile; this one uses
    ``HYPOTHESIS_PROFILE=thorough`` (400 random examples per test, a new seed each run).
    """
    _install(session, "-e", ".[dev,vision,graph,data]")
    files = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").glob("test_fuzz_*.py"))
    _pytest(session, *files, env={"HYPOTHESIS_PROFILE": "thorough"})


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
    if pjrt == "CPU":
        # XLA compiles every new graph; on its CPU backend, LLVM's optimisation passes dominate that and
        # halve the suite's time when skipped (the numbers are checked, not the speed of the code).
        env["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()
        # torch_xla's eager mode: each op is compiled once per shape and run at once, instead of tracing a
        # whole solve (hundreds of steps) into one graph that is compiled anew for every new grid or shape.
        # Far faster (tests/test_transevolve.py: 29 min traced, 9 s eager); the ops and their lowerings are the same.
        env["NEURALODE_TF_XLA_EAGER"] = "1"
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


OLDEST = ROOT / "constraints" / "oldest.txt"

# A small notebook (py:percent) that tests_oldest converts with jupytext and runs with nbval: the docs
# tools at their bounds (jupytext, nbval, nbclient, ipykernel, matplotlib) on the installed wheel.
# The tutorials themselves read results from the repository and take half an hour: `nox -s notebooks`.
_DOCS_SMOKE = """# %%
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

import neuralode_tf
from neuralode_tf.models import transformer_field

# %%
field = transformer_field(16, 2, 2)
y = neuralode_tf.solve(field, torch.randn(1, 3, 16), [0.0, 1.0], method="rk4", steps=2).y1
fig, ax = plt.subplots()
ax.plot(y[0, :, 0].detach())
fig.savefig("smoke.png")
print(neuralode_tf.__file__, tuple(y.shape))
"""

# A pytest plugin that tests_oldest writes beside its copy of the suite and loads with ``-p``: once
# collection has imported the test modules, neuralode_tf must be the installed wheel's.
_INSTALLED_CHECK = '''"""Written by nox's tests_oldest: the suite must test the installed wheel, not a source tree."""
import os
import sys
from pathlib import Path

import pytest


def _where():
    module = sys.modules.get("neuralode_tf")
    return Path(module.__file__).resolve() if module is not None else None


def pytest_report_header(config):
    import neuralode_tf

    return f"neuralode_tf under test: {neuralode_tf.__file__}"


def pytest_collection_finish(session):
    where, site = _where(), Path(os.environ["NEURALODE_TF_EXPECT_SITE"]).resolve()
    if where is None or site not in where.parents:
        raise pytest.UsageError(f"neuralode_tf was imported from {where}, not from the installed wheel in {site}")
'''


def _pins(path: Path) -> dict[str, str]:
    """``{name: version}`` of the ``name==version`` lines of a constraints file."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        spec = line.split("#", 1)[0].strip()
        if "==" in spec:
            name, version = (part.strip() for part in spec.split("==", 1))
            pins[name] = version
    return pins


@nox.session(reuse_venv=True)
def tests_oldest(session: nox.Session) -> None:
    """The CPU suite against the built wheel, with every dependency at its lower bound (constraints/oldest.txt).

    Builds an sdist and, from it, a wheel (so a file left out of either is missing here too), installs the
    wheel with the test, docs and hf extras under ``-c constraints/oldest.txt``, checks that the installed
    versions are the pins, and runs a copy of tests/ (with benchmarks/ and paper_repro/claims/, which some
    tests import, and README.md and docs/, which some read) from a temporary folder, so that ``neuralode_tf``
    can only be imported from site-packages. Then the docs and dev tools at their bounds: a small notebook
    through jupytext and nbval, ``nox --list`` and ``ruff check``. Extra arguments go to the suite's pytest,
    e.g. ``nox -s tests_oldest -- -x -k solve``.
    """
    if _no_venv(session):
        session.error(
            "tests_oldest installs the oldest supported versions (constraints/oldest.txt) into its own "
            "virtualenv and tests the built wheel; it cannot run with --no-venv. Run `nox -s tests_oldest`"
        )
    tmp = Path(session.create_tmp()).resolve()
    dist = tmp / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.install("build")
    session.run("python", "-m", "build", "--outdir", str(dist), str(ROOT))
    wheels = sorted(dist.glob("neuralode_tf-*.whl"))
    if len(wheels) != 1:
        session.error(f"expected one wheel in {dist}, found {[w.name for w in wheels]}")
    wheel = wheels[0]
    constraints = ["-c", str(OLDEST), "--only-binary=:all:"]
    session.install(*constraints, f"neuralode-tf[dev,vision,graph,data,docs,hf] @ {wheel.as_uri()}")
    # The same version number as a previous run's wheel: replace it (its dependencies are in place).
    session.install("--force-reinstall", "--no-deps", str(wheel))
    session.run("python", "-m", "pip", "check")

    pins = _pins(OLDEST)
    session.run(
        "python",
        "-c",
        "import importlib.metadata as m, sys\n"
        "pins = dict(arg.split('==') for arg in sys.argv[1:])\n"
        "wrong = []\n"
        "for name, pin in pins.items():\n"
        "    got = m.version(name)\n"
        "    print(f'{name:16} {got:12} (pin {pin})')\n"
        "    wrong += [name] if got != pin else []\n"
        "sys.exit(f'not at their pins: {wrong}' if wrong else 0)\n",
        *(f"{name}=={version}" for name, version in pins.items()),
    )

    # The suite runs from a copy: the repository root is nowhere on sys.path.
    suite = tmp / "suite"
    shutil.rmtree(suite, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "results")
    shutil.copytree(ROOT / "tests", suite / "tests", ignore=ignore)
    shutil.copytree(ROOT / "benchmarks", suite / "benchmarks", ignore=ignore)
    shutil.copytree(ROOT / "paper_repro" / "claims", suite / "paper_repro" / "claims", ignore=ignore)
    shutil.copytree(ROOT / "docs", suite / "docs", ignore=ignore)  # the extending guide and the pages tests read
    shutil.copy(ROOT / "README.md", suite / "README.md")
    shutil.copy(ROOT / "pyproject.toml", suite / "pyproject.toml")  # the pytest settings and markers
    (suite / "_installed_check.py").write_text(_INSTALLED_CHECK, encoding="utf-8")
    site = session.run("python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", silent=True)
    env = {"NEURALODE_TF_EXPECT_SITE": str(site).strip().splitlines()[-1]}
    with session.chdir(suite):
        session.run(
            "python",
            "-c",
            "import os, neuralode_tf; from pathlib import Path; where = Path(neuralode_tf.__file__).resolve(); "
            "print('neuralode_tf from', where); "
            "assert Path(os.environ['NEURALODE_TF_EXPECT_SITE']).resolve() in where.parents, 'not the wheel'",
            env=env,
        )
        session.run("neuralode-tf", "train", "--list", silent=True)  # the wheel's console script starts
        plugins = ["-p", "_installed_check", "-p", "no:cacheprovider"]
        session.run("python", "-m", "pytest", *plugins, "tests", *session.posargs, env=env)
        docs = suite / "docs_smoke"
        docs.mkdir()
        (docs / "smoke.py").write_text(_DOCS_SMOKE, encoding="utf-8")
        session.run("jupytext", "--to", "ipynb", str(docs / "smoke.py"))
        session.run("python", "-m", "pytest", *plugins[2:], "--nbval-lax", "--nbval-current-env", str(docs))
    # The dev tools at their bounds: the oldest nox reads this noxfile, the oldest ruff passes the tree.
    session.run("nox", "--list", "--noxfile", str(ROOT / "noxfile.py"), silent=True)
    session.run("ruff", "check", str(ROOT))


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
    _install(session, "-e", ".[dev,vision,graph,data,docs,hf]")  # hf: tutorials/06_huggingface_ode
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
def claims(session: nox.Session) -> None:
    """Recompute the five claims ledgers (``paper_repro/claims``: the four papers', depth dynamics): exact claims
    from the code, verdicts from the recordings; fails if a stored entry or the README's verdict counts are stale."""
    _install(session, "-e", ".[dev,vision,graph,data]")
    session.run(_python(session), "-m", "paper_repro.claims", "--check")


@nox.session(reuse_venv=True)
def lint(session: nox.Session) -> None:
    """ruff check (formatting is not enforced), then mypy on the package (settings in pyproject.toml)."""
    _install(session, "-e", ".[dev]")
    session.run(_python(session), "-m", "ruff", "check", ".")
    session.run(_python(session), "-m", "mypy")


@nox.session(reuse_venv=True)
def bench(session: nox.Session) -> None:
    """The performance suite, the TransEvolve benchmark, the language model's training step and its generation
    against Hugging Face's (``benchmarks/``), then the side-by-side table of their rows
    (``benchmarks/side_by_side.py``); writes benchmarks/results/*.json and side_by_side_<device>.md.

    Extra arguments go to the suite, e.g. ``nox -s bench -- --quick`` (which the others take as their own quick run).
    """
    _install(session, "-e", ".[dev,vision,data]")
    python = _python(session)
    env = {"OMP_NUM_THREADS": "2"}
    quick = ["--quick"] if "--quick" in session.posargs else []
    session.run(python, "-m", "benchmarks.suite", *session.posargs, env=env)
    session.run(python, "-m", "benchmarks.transevolve", *quick, env=env)
    session.run(python, "-m", "benchmarks.output_times", env=env)
    session.run(python, "-m", "benchmarks.lm_training", *quick, env=env)
    session.run(python, "-m", "benchmarks.generation", "--huggingface", *quick, env=env)
    session.run(python, "-m", "benchmarks.side_by_side")


@nox.session(reuse_venv=True)
def docs(session: nox.Session) -> None:
    """Build the documentation site (``mkdocs.yml``, the ``site`` extra) into ``site/``; open ``site/index.html``.

    ``mkdocs build --strict``: every warning fails the build, a broken link, anchor or API cross-reference
    included. The notebooks are rendered as committed, not executed. Extra arguments go to ``mkdocs build``.
    """
    _install(session, "-e", ".[site]")
    env = {"NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's notice about its successor, not a build warning
    session.run(_python(session), "-m", "mkdocs", "build", "--strict", "--site-dir", "site", *session.posargs, env=env)
