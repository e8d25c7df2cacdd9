import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# property tests assert values, never speed: no deadline and no "too slow" health check,
# however loaded the machine (a 200 ms deadline failed a test on a loaded 2-core machine).
# A test's own @settings adds to this profile.
settings.register_profile("finbench", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("finbench")

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
_CACHE = tempfile.mkdtemp(prefix="finbench-test-cache-")


def pytest_configure(config):
    """The test session's own cache folder (kept calendars, LLM responses), never the user's
    ``~/.cache/finbench``; commands the tests start inherit it. A test may set its own."""
    os.environ["FINBENCH_CACHE_DIR"] = _CACHE


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE, ignore_errors=True)


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


@pytest.fixture
def server():
    """A loopback chat-completions server (tests/llm_server.py), closed after the test."""
    from tests.llm_server import ChatServer

    s = ChatServer()
    yield s
    s.close()


@pytest.fixture
def llm_env(monkeypatch, tmp_path):
    """An API key in FINBENCH_TEST_KEY and a response cache of the test's own."""
    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))
