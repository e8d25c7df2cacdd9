"""Three-class tables' speed: each cell's rows grouped once, against the naive references that
filter each cell's rows out of the whole frame (tests/reference.py ``naive_class_table`` and
``naive_class_intervals``, the way ``scores3`` and the report computed them before).

Random class rows (tests/test_scores3_cells.py's ``rows_of``: three models asked every task,
three horizons, missing values), then prints, measured in this run:
  - at 100 tickers x 60 sessions (54,000 rows, 312 cells): the table's CPU, fastest of three,
    against the naive reference's, once; the two tables the same bit for bit (target >= 20x);
  - at 500 tickers x 252 sessions (1,134,000 rows, 1,512 cells, a year of the intraday
    track): the table's CPU alone (the reference would take minutes).
Run: .venv/bin/python benchmarks/bench_scores3.py [TICKERS SESSIONS]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from types import SimpleNamespace  # noqa: E402

import pandas as pd  # noqa: E402

from finbench.scoring.bootstrap import Draws  # noqa: E402
from finbench.tracks.intraday.report3 import with_intervals  # noqa: E402
from finbench.tracks.intraday.scores3 import _class_table  # noqa: E402
from tests.reference import naive_class_intervals, naive_class_table  # noqa: E402
from tests.test_scores3_cells import MODELS, config, rows_of  # noqa: E402

SMALL = (100, 60)
YEAR = (500, 252)
REPEATS = 3


def cpu(fn, repeats: int = 1):
    """(fastest CPU seconds of ``repeats`` calls, the last call's result)."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def main() -> None:
    small = tuple(int(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else SMALL
    year = small if len(sys.argv) > 2 else YEAR
    names = list(MODELS)
    rows = rows_of(1, *small)
    fast, table = cpu(lambda: _class_table(config(), rows, names), REPEATS)
    naive, want = cpu(lambda: naive_class_table(config(), rows, names))
    pd.testing.assert_frame_equal(table, want, check_exact=True)
    print(f"{small[0]} tickers x {small[1]} sessions ({len(rows):,} rows, {len(table):,} "
          f"cells): the table {fast:.3f} s CPU, the naive filters {naive:.3f} s; the same "
          f"table bit for bit")
    print(f"speed-up vs naive: {naive / fast:.1f}x (target >= 20x)")
    scored = rows[rows["scored"]].reset_index(drop=True)

    def data():
        return SimpleNamespace(config=config(), draws=Draws())
    fast, shown = cpu(lambda: with_intervals(table, scored, data()), REPEATS)
    naive, want = cpu(lambda: naive_class_intervals(table, scored, data()))
    pd.testing.assert_frame_equal(shown, want, check_exact=True)
    print(f"the report's intervals of that table: {fast:.3f} s CPU, the naive filters "
          f"{naive:.3f} s ({naive / fast:.1f}x); the same table bit for bit")
    rows = rows_of(2, *year)
    took, table = cpu(lambda: _class_table(config(), rows, names), REPEATS)
    print(f"{year[0]} tickers x {year[1]} sessions ({len(rows):,} rows, {len(table):,} cells): "
          f"the table {took:.2f} s CPU ({took / len(table) * 1e3:.2f} ms a cell)")


if __name__ == "__main__":
    main()
