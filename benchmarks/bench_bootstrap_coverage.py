"""Coverage of the session bootstrap on simulated benchmarks with within-session correlation.

500 simulated benchmarks of 9 rows a session; the per-row losses of a model and of a
baseline each carry a session effect (good and bad days), so rows of a session are
correlated. The true skill 1 - E[L_model] / E[L_base] is known by construction.
Prints how often the 95% session-bootstrap and row-bootstrap intervals cover it (target for the
session bootstrap: 92-98%), at 60 sessions and at the few sessions below which report rows are
marked "descriptive only" (``min_sessions``, 20); and, when a factor moves every ticker of a
session together, how far ``cluster = "session_ticker"`` falls short. Run:
.venv/bin/python benchmarks/bench_bootstrap_coverage.py [SESSIONS ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from finbench.scoring.bootstrap import skill_ci  # noqa: E402

ROWS, SIMS, REPLICATES = 9, 500, 1000
SESSION_COUNTS = (60, 20, 10)
MEAN_BASE, MEAN_MODEL = 0.25, 0.23  # true skill = 1 - 0.23 / 0.25 = 0.08


def simulate(rng: np.random.Generator, sessions: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    session = np.repeat(np.arange(sessions), ROWS)
    # Each model has good and bad days: session effects shared by the rows of one session.
    base = MEAN_BASE + rng.normal(0, 0.04, sessions)[session] + rng.normal(0, 0.03, len(session))
    model = MEAN_MODEL + rng.normal(0, 0.04, sessions)[session] + rng.normal(0, 0.03,
                                                                              len(session))
    return model, base, session


def coverage(sessions: int = 60, seed: int = 1, row_sims: int = SIMS
             ) -> tuple[float, float, float]:
    """(session-bootstrap coverage over :data:`SIMS` benchmarks, row-bootstrap coverage over
    the first ``row_sims`` of them, the true skill). The row bootstrap draws a weight per row
    (540 at 60 sessions), six times the session bootstrap's cost; it is here to show it
    undercovers (about half), which fewer benchmarks show as well."""
    rng = np.random.default_rng(seed)
    truth = 1 - MEAN_MODEL / MEAN_BASE
    hit_session = hit_row = 0
    for k in range(SIMS):
        model, base, session = simulate(rng, sessions)
        s = skill_ci(model, base, session, replicates=REPLICATES, seed=k)
        hit_session += s.lower <= truth <= s.upper
        if k < row_sims:
            r = skill_ci(model, base, np.arange(len(session)), replicates=REPLICATES, seed=k)
            hit_row += r.lower <= truth <= r.upper
    return hit_session / SIMS, hit_row / max(row_sims, 1), truth


TICKERS, HORIZONS = 10, 3


def ticker_coverage(sessions: int = 40, seed: int = 3, sims: int = 300
                    ) -> tuple[float, float, float]:
    """(session clusters' coverage, session x ticker clusters' coverage, the true skill) over
    ``sims`` benchmarks of :data:`TICKERS` tickers at :data:`HORIZONS` horizons a session,
    whose losses carry a factor that moves every ticker of a session together (a market day)
    besides each ticker's own day: ``cluster = "session_ticker"`` takes the tickers of a
    session for independent, and its intervals are too narrow."""
    rng = np.random.default_rng(seed)
    truth = 1 - MEAN_MODEL / MEAN_BASE
    session = np.repeat(np.arange(sessions), TICKERS * HORIZONS)
    cell = session * TICKERS + np.tile(np.repeat(np.arange(TICKERS), HORIZONS), sessions)
    hits = [0, 0]
    for k in range(sims):
        losses = [mean + rng.normal(0, 0.04, sessions)[session]
                  + rng.normal(0, 0.02, sessions * TICKERS)[cell]
                  + rng.normal(0, 0.03, len(session)) for mean in (MEAN_MODEL, MEAN_BASE)]
        for j, clusters in enumerate((session, cell)):
            ci = skill_ci(*losses, clusters, replicates=REPLICATES, seed=k)
            hits[j] += ci.lower <= truth <= ci.upper
    return hits[0] / sims, hits[1] / sims, truth


def group_coverage(groups: int, seed: int = 5, sims: int = 300) -> float:
    """Coverage of the event track's group bootstrap (its Brier skill interval) over ``sims``
    benchmarks of ``groups`` event groups of 3 markets each, whose losses carry a group
    effect (the markets of one election move together)."""
    from finbench.scoring.bootstrap import skill_ci

    rng = np.random.default_rng(seed)
    truth = 1 - MEAN_MODEL / MEAN_BASE
    group = np.repeat(np.arange(groups), 3)
    hits = 0
    for k in range(sims):
        losses = [mean + rng.normal(0, 0.04, groups)[group] + rng.normal(0, 0.03, len(group))
                  for mean in (MEAN_MODEL, MEAN_BASE)]
        ci = skill_ci(*losses, group, replicates=REPLICATES, seed=k, level=0.95)
        hits += ci.lower <= truth <= ci.upper
    return hits / sims


def main() -> None:
    counts = [int(a) for a in sys.argv[1:]] or SESSION_COUNTS
    for sessions in counts:
        session, row, truth = coverage(sessions)
        print(f"{SIMS} simulated benchmarks, {sessions} sessions x {ROWS} rows, true skill "
              f"{truth:.3f}: 95% session-bootstrap coverage {session:.1%} (target 92-98%), "
              f"row bootstrap {row:.1%} (ignores the within-session correlation)")
    session, cell, truth = ticker_coverage()
    print(f"300 simulated benchmarks, 40 sessions x {TICKERS} tickers x {HORIZONS} horizons, a "
          f"factor moving every ticker of a session: 95% coverage with session clusters "
          f"{session:.1%}, with session x ticker clusters {cell:.1%}")
    for groups in (5, 10, 20, 40):
        print(f"300 simulated event benchmarks, {groups} event groups x 3 markets: 95% "
              f"group-bootstrap coverage {group_coverage(groups):.1%} (target 92-98%)")


if __name__ == "__main__":
    main()
