"""A run folder belongs to one process: a second one fails at once naming the holder, and the
lock of a killed process is taken over. Real processes throughout."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from finbench.audit import audit_run
from finbench.core.errors import RunError
from finbench.core.folder_lock import LOCK_FILE
from finbench.runlog.runlock import RunLock
from finbench.runner import run
from tests.llm_server import ChatServer

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
HOLD = ("import sys, time\nfrom finbench.runlog.runlock import RunLock\n"
        "with RunLock(sys.argv[1], command='holder'):\n"
        "    print('held', flush=True)\n    time.sleep(120)\n")


def pilot_config(tmp_path: Path, store: Path, extra: str = "") -> Path:
    path = tmp_path / "cfg.toml"
    path.write_text(f'[data]\nstore = "{store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
                    f'start = "2025-01-15"\nend = "2025-01-15"\n'
                    f'[[models]]\nname = "coin"\nkind = "coin"\n{extra}')
    return path


def finbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "finbench", *map(str, args)], env=ENV,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def holder(tmp_path):
    """A process holding the lock of ``tmp_path / "out"`` until killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "out")], env=ENV,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait()
    proc.stdout.close()


def test_a_second_process_fails_at_once_naming_the_holder(tmp_path, sample_store, holder):
    cfg = pilot_config(tmp_path, sample_store)
    started = time.monotonic()
    result = finbench("run", cfg, "--out", tmp_path / "out")
    assert result.returncode == 2 and time.monotonic() - started < 30
    assert (f"RunError: {tmp_path / 'out'}: in use by process {holder.pid} (holder, started "
            in result.stderr)
    assert "wait until it ends" in result.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()  # nothing written under it


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path, sample_store, holder):
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    details = json.loads((tmp_path / "out" / LOCK_FILE).read_text())
    assert details["pid"] == holder.pid  # the dead holder's details are still there
    result = finbench("run", pilot_config(tmp_path, sample_store), "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert f"taking over from process {holder.pid} (holder, started" in result.stderr
    assert (tmp_path / "out" / LOCK_FILE).read_text() == ""  # released cleanly
    result = finbench("score", tmp_path / "out")  # no leftover lock after a clean end
    assert result.returncode == 0, result.stderr


def test_writers_and_readers_exclude_each_other(tmp_path, sample_store):
    out = run(pilot_config(tmp_path, sample_store), tmp_path / "run", echo=lambda *_: None)
    with RunLock(out, command="finbench audit", shared=True):
        with RunLock(out, command="another audit", shared=True):  # readers share
            pass
        with pytest.raises(RunError, match=r"in use by another process \(a reader"):
            RunLock(out, command="finbench score").__enter__()
    with RunLock(out, command="finbench report"):
        with pytest.raises(RunError, match="in use by process"):
            audit_run(out)
    (tmp_path / "file").write_text("")
    with pytest.raises(RunError, match="is a file, not a run directory"):
        RunLock(tmp_path / "file", command="finbench run").__enter__()


@pytest.mark.slow
def test_two_runs_on_one_folder_make_every_paid_call_once(tmp_path, sample_store,
                                                           monkeypatch):
    """Two `finbench run` at once on the same --out made every LLM call twice, vanished
    temporary files under each other, or lost forecasts silently."""
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-test")
    slow = ChatServer(delay=0.2)
    try:
        cfg = pilot_config(tmp_path, sample_store, (
            f'[[models]]\nname = "m"\nkind = "openai"\nmodel = "valid"\n'
            f'base_url = "{slow.base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n'
            "concurrency = 1\n"))
        out = tmp_path / "out"
        env = {**ENV, "FINBENCH_CACHE_DIR": str(tmp_path / "cache"),
               "FINBENCH_TEST_KEY": "sk-test"}
        first = subprocess.Popen([sys.executable, "-m", "finbench", "run", str(cfg), "--out",
                                  str(out)], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not (out / LOCK_FILE).is_file() or not (out / LOCK_FILE).read_text():
            assert time.monotonic() < deadline and first.poll() is None
            time.sleep(0.05)
        second = subprocess.run([sys.executable, "-m", "finbench", "run", str(cfg), "--out",
                                 str(out)], env=env, capture_output=True, text=True,
                                timeout=120)
        said, _ = first.communicate(timeout=120)
        assert first.returncode == 0, said
        assert second.returncode == 2
        assert f"in use by process {first.pid} (finbench run {cfg}" in second.stderr
        lines = [json.loads(x) for x in (out / "journal.jsonl").read_text().splitlines()]
        assert sorted(x["task_id"] for x in lines) == sorted(
            f"{t}|2025-01-15|{h}" for t in ("AAPL", "MSFT")
            for h in ("MORNING", "MIDDAY", "CLOSE"))
        assert slow.total == 6  # every paid call made once
        f = pd.read_parquet(out / "forecasts.parquet")
        assert len(f) == 12 and not f.duplicated(["task_id", "model"]).any()
        assert audit_run(out) == []
    finally:
        slow.close()
