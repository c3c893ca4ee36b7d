"""The package's shape: its layers import only downward, and every module holds one concept (< 300 lines).

The layers, top to bottom (the README's architecture sketch draws the same):

    train, notebook  ->  models  ->  continuous (ContinuousDepth)  ->  _checks (its settings)  ->  fields  ->  nn
    ->  numerics  ->  protocols, data, flops  ->  _tree (a state's structure), _dynamo  ->  _typing

A unit may import its own modules and any unit below it, never one above, and no module may import itself back
through others (no import cycle, inside a unit either; imports under ``if TYPE_CHECKING:`` do not run). A new
top-level module or subpackage must be placed in ``_LAYERS`` here, which is the point: its place is a decision.

Two rules narrow that: ``nn`` imports nothing of ``numerics`` (a residual branch checks its masks without the
solver), and no module outside ``numerics`` imports one of its private modules (``numerics._validate``, ...): what
the others need of it, its ``__init__`` exports.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import neuralode_tf

PACKAGE = Path(neuralode_tf.__file__).resolve().parent  # the package under test (the wheel under tests_oldest)
MAX_LINES = 300

_LAYERS = [
    {"_typing", "_renamed"},
    {"_tree", "_dynamo"},
    {"protocols", "data", "flops"},
    {"numerics"},
    {"nn"},
    {"fields"},
    {"_checks"},
    {"continuous"},
    {"models"},
    {"dynamics"},
    {"train", "notebook"},
    {"__init__", "__main__"},
]
_RANK = {unit: rank for rank, units in enumerate(_LAYERS) for unit in units}
_NOT_IMPORTED = {"nn": {"numerics"}}
"""Units below a unit that it must not import all the same, with the units they are kept from."""

pytestmark = pytest.mark.cpu_only("reads the package's source files")


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _unit(dotted: str) -> str:
    """The top-level unit of ``neuralode_tf.<unit>...`` (``__init__`` for the package itself)."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path, *, runtime: bool = False) -> set[str]:
    """The ``neuralode_tf...`` modules (or module.name) that ``path`` imports, as absolute dotted names; with
    ``runtime``, leaving out those under ``if TYPE_CHECKING:``, which only a type checker reads."""
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    package = list(relative.parts[:-1]) if path.name != "__init__.py" else list(relative.parts[:-1])
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if runtime and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for statement in node.body
        for inner in ast.walk(statement)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if node.module:
                found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)  # a name may be a module
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "neuralode_tf" or name.startswith("neuralode_tf.")}


def _own_unit(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.with_suffix("").parts[0] if len(relative.parts) > 1 else relative.stem


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_import_only_downward(path: Path):
    unit = _own_unit(path)
    assert unit in _RANK, f"{unit} has no layer: place it in _LAYERS of {Path(__file__).name}"
    upward = []
    for target in sorted(_imports(path)):
        other = _unit(target)
        assert other in _RANK, f"{path.name} imports {target}, whose unit {other} has no layer"
        if other != unit and _RANK[other] >= _RANK[unit]:
            upward.append(f"{target} (layer {_RANK[other]}, this module's: {_RANK[unit]})")
    assert not upward, f"{path.relative_to(PACKAGE)} imports sideways or upward: {upward}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_import_no_unit_kept_from_theirs(path: Path):
    kept_from = _NOT_IMPORTED.get(_own_unit(path), set())
    found = sorted(target for target in _imports(path) if _unit(target) in kept_from)
    assert not found, f"{path.relative_to(PACKAGE)} imports {found}: its unit must not import {sorted(kept_from)}"


@pytest.mark.parametrize(
    "path", [p for p in _modules() if _own_unit(p) != "numerics"], ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_only_numerics_imports_its_private_modules(path: Path):
    """``from ..numerics._validate import x`` and ``from ..numerics import _validate`` alike."""
    private = sorted(t for t in _imports(path) if t.startswith("neuralode_tf.numerics._"))
    assert not private, f"{path.relative_to(PACKAGE)} imports private modules of numerics: {private}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_cycles() -> list[list[str]]:
    """The strongly connected components of more than one module in the graph of runtime imports (a function's
    import counts: it runs when called), by Tarjan's algorithm."""
    modules = {_module_name(path): path for path in _modules()}

    def module_of(target: str) -> str:  # "neuralode_tf.fields.SplitField" -> "neuralode_tf.fields"
        while target not in modules:
            target = target.rpartition(".")[0]
        return target

    graph = {name: {module_of(t) for t in _imports(path, runtime=True)} - {name} for name, path in modules.items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(name: str) -> None:
        order[name] = low[name] = len(order)
        stack.append(name)
        for other in graph[name]:
            if other not in order:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in stack:
                low[name] = min(low[name], order[other])
        if low[name] == order[name]:
            component = stack[stack.index(name) :]
            del stack[stack.index(name) :]
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in sorted(graph):
        if name not in order:
            visit(name)
    return cycles


_MODEL_GROUPS = ["readings", "converters", "frontends", "registry"]
"""The groups of ``models/``, bottom to top: a front-end may be built on a converted model (a pretrained text
classifier), the registry names them all; what several groups share is a private module of ``models/`` itself."""


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.joinpath("models").rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_model_groups_import_only_downward(path: Path):
    parts = path.relative_to(PACKAGE / "models").parts
    group = parts[0] if len(parts) > 1 else None
    assert group is None or group in _MODEL_GROUPS, f"models/{group} is in no group of _MODEL_GROUPS"
    if path.name == "__init__.py" and group is None:
        return  # the package exports every group's names
    rank = _MODEL_GROUPS.index(group) if group else -1  # a shared private module of models/ imports no group
    groups = {target: target.split(".")[2] for target in _imports(path) if target.startswith("neuralode_tf.models.")}
    upward = [t for t, other in groups.items() if other in _MODEL_GROUPS and _MODEL_GROUPS.index(other) > rank]
    assert not upward, f"models/{'/'.join(parts)} imports a group above its own: {sorted(upward)}"


def test_no_import_cycle_inside_a_package():
    """No module imports, directly or through others, a module that imports it back: within a package too, where
    the layering test above does not look (a preset table and the config it is built from once formed one)."""
    assert _import_cycles() == []


def test_the_cycle_finder_finds_a_cycle(tmp_path, monkeypatch):
    """The finder itself: two modules that import each other (one inside a function) form a cycle; an import
    under ``if TYPE_CHECKING:`` does not."""
    package = tmp_path / "neuralode_tf"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from .b import g\n")
    (package / "b.py").write_text("from .a import f\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import h\n")
    (package / "d.py").write_text("from .c import TYPE_CHECKING\n")
    monkeypatch.setitem(globals(), "PACKAGE", package)
    assert _import_cycles() == [["neuralode_tf.a", "neuralode_tf.b"]]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_hold_one_concept(path: Path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines (> {MAX_LINES}): split it by concept"


def test_the_core_package_does_not_load_the_notebook_helper_or_the_cli():
    import subprocess
    import sys

    heavy = ("neuralode_tf.train", "neuralode_tf.notebook", "matplotlib")
    code = f"import sys, neuralode_tf; print(sorted(m for m in sys.modules if m.startswith({heavy!r})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    "name",
    [
        "neuralode_tf",
        *(f"neuralode_tf.{p}" for p in ("numerics", "fields", "nn", "models", "data", "train", "dynamics")),
    ],
)
def test_a_package_lists_its_public_names_only(name):
    import importlib

    package = importlib.import_module(name)
    assert dir(package) == sorted(package.__all__)
    missing = [n for n in package.__all__ if not hasattr(package, n)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"
