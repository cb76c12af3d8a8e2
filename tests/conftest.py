"""Shared fixtures: where the real data lives, and the shipped instances."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = ROOT.parent / "shared" / "data"
INSTANCES = ROOT / "instances"


@pytest.fixture
def data_dir() -> Path:
    """``../shared/data``; tests that need it skip where it is absent."""
    if not DATA_DIR.is_dir():
        pytest.skip("../shared/data is not present")
    return DATA_DIR
