"""docs/extending.md runs: its ``python`` blocks, in order, in one fresh interpreter.

A fresh interpreter, because the guide registers a tableau, a splitting scheme, a backend, a model, a
preset, a dataset and a family, and those registries are global.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def _code(markdown: str) -> str:
    return "\n\n".join(re.findall(r"^```python\n(.*?)^```$", markdown, flags=re.MULTILINE | re.DOTALL))


@pytest.mark.cpu_only("runs the guide's code in a subprocess")
def test_the_extending_guide_runs(tmp_path):
    code = _code(GUIDE.read_text(encoding="utf-8"))
    assert code.count("register_") >= 5, "the guide lost a registration example"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "error ratio when halving the step" in done.stdout
