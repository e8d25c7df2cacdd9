import shutil
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


@pytest.fixture(scope="session")
def sample_store() -> Path:
    """The committed synthetic sample store (read-only in tests)."""
    assert (SAMPLE / "manifest.json").is_file(), "data/sample is missing: run make sample"
    return SAMPLE


@pytest.fixture
def sample_copy(tmp_path, sample_store) -> Path:
    """A writable copy of the sample store."""
    dest = tmp_path / "sample"
    shutil.copytree(sample_store, dest)
    return dest
