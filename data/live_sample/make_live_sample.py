"""Writes the SYNTHETIC sealed season beside it: ``finbench live`` run on a fake clock over
three sessions of the bundled sample (2025-01-13 to 2025-01-15, AAPL alone, a coin and a
scripted forecaster), its bars fed into ``store/`` as the clock passed (three sessions of
history before it), every horizon's answers sealed by the tests' own RFC 3161 authority (its
root certificate is ``tsa_root.pem``: a test CA, not a public one). A newcomer checks it with

    .venv/bin/finbench verify data/live_sample

Run from the repository's root to write it again (the tokens, nonces and certificate are new
each time): .venv/bin/python data/live_sample/make_live_sample.py
"""

from __future__ import annotations

import datetime as dt
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from finbench.live.clock import FakeClock  # noqa: E402
from finbench.live.season import live  # noqa: E402
from tests.live_feed import LiveFeed  # noqa: E402
from tests.tsa_server import TimestampAuthority  # noqa: E402

HERE = Path(__file__).resolve().parent
FIRST, LAST = dt.date(2025, 1, 13), dt.date(2025, 1, 15)
CONFIG = """# The SYNTHETIC sealed season (make_live_sample.py wrote it): three sessions of AAPL
[data]
store = "store"
[tasks]
tickers = ["AAPL"]
start = "2025-01-13"
end = "2025-01-15"
[context]
previous_sessions = 2
[[models]]
name = "coin"
kind = "coin"
[[models]]
name = "scripted"
kind = "scripted"
answers = ['{"p_up": 0.55, "lower": -0.004, "upper": 0.005, "rationale": "a steady tape"}']
[live]
tsa_url = "%s"
tsa_root = "tsa_root_of_the_tests.pem"
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        feed = LiveFeed(ROOT / "data" / "sample", work / "store", ["AAPL"], FIRST, history=3)
        start = dt.datetime(2025, 1, 13, 13, 0, tzinfo=dt.UTC)
        clock = FakeClock(start, on_advance=feed)
        feed(start)
        tsa = TimestampAuthority(clock=clock.now)
        (work / "tsa_root_of_the_tests.pem").write_bytes(tsa.ca_pem())
        (work / "live.toml").write_text(CONFIG % tsa.url)
        out = live(work / "live.toml", work, clock=clock, until=LAST, echo=print)
        tsa.close()
        for kept in [p for p in HERE.iterdir() if p.name != Path(__file__).name]:
            shutil.rmtree(kept) if kept.is_dir() else kept.unlink()
        for name in ("ledger.jsonl", "live.json", "tsa_root.pem", "run.toml", "live.toml",
                     "tsa_root_of_the_tests.pem"):
            shutil.copy(out / name, HERE / name)
        # horizons/ (each horizon's run as made: its journal, transcripts and receipts) is
        # left out for size, and private/ (the nonces, all revealed in the ledger)
        for folder in ("sealed", "run", "store"):
            shutil.copytree(out / folder, HERE / folder)


if __name__ == "__main__":
    main()
