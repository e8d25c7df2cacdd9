"""Small builders shared by tests: tiny bar files written by hand."""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path

import pandas as pd

HEADER = "ticker,ts,open,high,low,close,volume\n"


def bar_rows(ticker: str, stamps_and_hl: list[tuple[str, float, float]]) -> str:
    """CSV lines for bars given as (ts, high, low); open/close = low, volume 100."""
    return "".join(f"{ticker},{ts},{lo},{hi},{lo},{lo},100\n" for ts, hi, lo in stamps_and_hl)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def store_files(store: Path) -> dict[str, bytes]:
    """Every file of a store with its bytes (to prove a failed ingest wrote nothing)."""
    if not store.exists():
        return {}
    return {p.relative_to(store).as_posix(): p.read_bytes() for p in store.rglob("*") if p.is_file()}


def utc(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def baselines_toml(*kinds: str) -> str:
    """``[[models]]`` blocks of baselines with default settings, each named after its kind."""
    return "".join(f'[[models]]\nname = "{k}"\nkind = "{k}"\n' for k in kinds)


def llm_toml(base_url: str, extra: str = "", name: str = "m") -> str:
    """A ``[[models]]`` block of a language model answering from the test's chat server at
    ``base_url`` (tests/llm_server.py; the key in FINBENCH_TEST_KEY, set by ``llm_env``),
    with ``extra`` settings (``concurrency = 1\n``, ...)."""
    return (f'[[models]]\nname = "{name}"\nkind = "openai"\nmodel = "valid"\n'
            f'base_url = "{base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n{extra}')


def scripted_toml(**answers: str) -> str:
    """``[[models]]`` blocks of scripted models, each named by its keyword and answering
    every task with the one text given."""
    return "".join(f"[[models]]\nname = \"{name}\"\nkind = \"scripted\"\nanswers = ['{text}']\n"
                   for name, text in answers.items())


def aapl_config(path: Path, store, body: str = "", *, start: str = "2025-01-15",
                end: str = "2025-01-15") -> Path:
    """A config of the sample's AAPL from ``start`` to ``end``; ``body`` follows the
    ``[tasks]`` keys (more task keys, ``[tasks.classes]``, models...)."""
    return write(path, f'[data]\nstore = "{store}"\n[tasks]\ntickers = ["AAPL"]\n'
                       f'start = "{start}"\nend = "{end}"\n{body}')


def month_shards_config(path: Path, store, extra: str = "") -> Path:
    """Three tickers of the sample from 2024-11-25 to 2025-01-08 (three calendar months, so
    three month shards) with the four binary baselines; ``extra``: more models."""
    return write(path, f'[data]\nstore = "{store}"\n[tasks]\n'
                       'tickers = ["AAPL", "MSFT", "NVDA"]\nstart = "2024-11-25"\n'
                       'end = "2025-01-08"\n'
                       + baselines_toml("coin", "base_rate", "momentum", "climatology") + extra)


def damaged_store(tmp_path: Path) -> tuple[Path, str]:
    """A copy of the sample store with ten bytes cut from the middle of one partition inside
    :func:`month_shards_config`'s range (its manifest still lists the old hash)."""
    import shutil

    store = tmp_path / "damaged"
    shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "sample", store)
    rel = "bars/date=2024-12-10/part.parquet"
    data = (store / rel).read_bytes()
    (store / rel).write_bytes(data[:len(data) // 2] + data[len(data) // 2 + 10:])
    return store, rel


def cli(*args) -> subprocess.CompletedProcess:
    """``finbench ARGS`` as a user gives it, its exit code and what it printed: the CLI's entry
    point (``finbench.cli.main``, what the ``finbench`` script calls) run in the test's
    process with its streams captured, as a ``python -m finbench`` process would give them
    without paying the imports again (argparse's refusal is its exit code 2). An exception the
    CLI lets out fails the test here, as a traceback in its stderr would."""
    from finbench.cli import main

    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())
