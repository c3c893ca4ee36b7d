"""The documentation tells the same story as the code: the README's architecture sketch names the package's
modules, and the training guide lists every preset."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import neuralode_tf
from neuralode_tf.train import PRESETS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(neuralode_tf.__file__).resolve().parent

pytestmark = pytest.mark.cpu_only("reads the documentation files")


def _sketch() -> str:
    readme = ROOT.joinpath("README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Architecture") :]
    return section[section.index("```\n") + 4 : section.index("\n```", section.index("```\n") + 4)]


def test_the_architecture_sketch_names_the_package_tree():
    named = set(re.findall(r"^(\w+(?:/|\.py))", _sketch(), flags=re.MULTILINE))
    tree = {
        f"{path.name}/" if path.is_dir() else path.name
        for path in PACKAGE.iterdir()
        if not path.name.startswith(("_", ".")) and (path.is_dir() or path.suffix == ".py") and path.name != "py.typed"
    }
    assert named == tree - {"notebook.py"}, f"sketch: {sorted(named)}, tree: {sorted(tree)}"
    for module in re.findall(r"\b(_?[a-z][a-z_0-9]*)\b", _sketch()):
        if module.startswith("_"):
            assert list(PACKAGE.rglob(f"{module}.py")), f"the sketch names {module}, which is not a module"


def test_the_training_guide_lists_every_preset():
    guide = ROOT.joinpath("docs", "guide", "training.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| (.*?) \|", guide, flags=re.MULTILINE))
    names = {name for row in listed for name in re.findall(r"`(\w+)`", row)}
    assert set(PRESETS) <= names, f"presets missing from docs/guide/training.md: {sorted(set(PRESETS) - names)}"


@pytest.mark.skipif(
    not ROOT.joinpath("tutorials").is_dir(), reason="needs the whole checkout (tests_oldest runs a copy of tests/)"
)
def test_relative_links_resolve_in_the_repository():
    """Every relative link of the Markdown pages names a file of the repository from the page's own folder, as
    GitHub reads it (the site build, ``mkdocs build --strict``, checks the same links on the site)."""
    broken = []
    for page in [ROOT / "README.md", *sorted(ROOT.joinpath("docs").rglob("*.md"))]:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            path = target.split("#", 1)[0]
            if path and not re.match(r"[a-z]+:", path) and not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_the_gradient_method_has_one_name():
    """How ``solve`` computes gradients is its ``gradient=``, the gradient method: no module or page calls it
    anything else ("gradient mode")."""
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *ROOT.joinpath("docs").rglob("*.md")]
    files = [path for path in [*pages, *PACKAGE.rglob("*.py")] if path.is_file()]
    saying = [str(path) for path in files if "gradient mode" in path.read_text(encoding="utf-8").lower()]
    assert not saying, f"'gradient mode' (say 'gradient method'): {saying}"
