"""A ledger recording's rows, or a skip where the recording is not beside the suite (the installed-wheel session
copies tests/ and paper_repro/claims/, not experiments/)."""

from __future__ import annotations

from typing import Any

import pytest


def recorded_rows(recording: Any) -> list[dict]:
    from paper_repro.claims import _ledger

    if not (_ledger.ROOT / recording.path).is_file():
        pytest.skip(f"{recording.path} is not beside this suite")
    return recording.rows()
