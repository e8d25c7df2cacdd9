"""Coverage of a known paired difference by the Diebold-Mariano (Newey-West) interval and by
the session bootstrap, on simulated benchmarks whose rows are correlated within a session.

Each simulated benchmark has S sessions of 9 rows; a row's loss differential is the true
difference (0.02) plus a session effect shared by the session's rows and a row's own noise,
with within-session correlation rho = 0.3. The DM interval holds the values its test at 5%
keeps, over the sessions' mean differentials (``finbench.scoring.inference.diebold_mariano``:
Newey-West at its default lags, Harvey-Leybourne-Newbold's form); the session bootstrap is
the reports' ``paired_difference``. Prints each one's 95% coverage (target 92-98% at >= 20
sessions) with its Monte Carlo standard error, and the share of benchmarks whose MDE (80%
power) is below the true difference. The sessions are independent here: what the Newey-West
variance costs where no serial correlation is. Run:
.venv/bin/python benchmarks/bench_inference.py [SESSIONS ...]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from finbench.scoring.bootstrap import paired_difference  # noqa: E402
from finbench.scoring.inference import default_lags, diebold_mariano, mde, series_of  # noqa: E402

ROWS, RHO, TRUTH, SD = 9, 0.3, 0.02, 0.05
# the bootstrap's interval costs REPLICATES resamples a benchmark, the DM test's none: the DM
# coverage is measured on ten times the benchmarks (its Monte Carlo error a third as large)
SIMS, SIMS_DM, REPLICATES = 2000, 20_000, 1000
SESSION_COUNTS = (20, 40, 80)


def benchmark(rng, session: np.ndarray, sessions: int) -> np.ndarray:
    """One simulated benchmark's row differentials."""
    return (TRUTH + rng.normal(0, SD * math.sqrt(RHO), sessions)[session]
            + rng.normal(0, SD * math.sqrt(1 - RHO), len(session)))


def dm_coverage(sessions: int, seed: int = 7, lags: int | None = None) -> float:
    """The DM interval's coverage at ``lags`` (default :func:`default_lags`): it covers the
    truth where the test of mean (d - truth) = 0 keeps it."""
    rng = np.random.default_rng(seed)
    session = np.repeat(np.arange(sessions), ROWS)
    hits = sum(diebold_mariano(series_of(benchmark(rng, session, sessions) - TRUTH, session),
                               lags)[1] >= 0.05 for _ in range(SIMS_DM))
    return hits / SIMS_DM


def bootstrap_coverage(sessions: int, seed: int = 7) -> tuple[float, float]:
    """(session-bootstrap coverage, share of benchmarks whose MDE is below the truth)."""
    rng = np.random.default_rng(seed)
    session = np.repeat(np.arange(sessions), ROWS)
    hits = detectable = 0
    for k in range(SIMS):
        diff = benchmark(rng, session, sessions)
        ci, _ = paired_difference(diff, np.zeros(len(diff)), session, replicates=REPLICATES,
                                  seed=k)
        hits += ci.lower <= TRUTH <= ci.upper
        detectable += mde(diff, session) < TRUTH
    return hits / SIMS, detectable / SIMS


def se(p: float, n: int) -> float:
    """The Monte Carlo standard error of a coverage ``p`` measured on ``n`` benchmarks."""
    return math.sqrt(p * (1 - p) / n)


def main() -> None:
    for sessions in [int(a) for a in sys.argv[1:]] or SESSION_COUNTS:
        dm = dm_coverage(sessions)
        cube = dm_coverage(sessions, lags=math.ceil(sessions ** (1 / 3)))
        boot, found = bootstrap_coverage(sessions)
        print(f"{sessions} sessions x {ROWS} rows, rho {RHO}, true difference {TRUTH}: 95% "
              f"coverage DM-HAC {dm:.1%} +- {se(dm, SIMS_DM):.1%} at {default_lags(sessions)} "
              f"lags ({cube:.1%} at ceil(S^(1/3)) = {math.ceil(sessions ** (1 / 3))}; "
              f"{SIMS_DM} benchmarks), session bootstrap {boot:.1%} +- {se(boot, SIMS):.1%} "
              f"({SIMS} benchmarks; target 92-98%); MDE (80% power) below the truth in "
              f"{found:.0%}")


if __name__ == "__main__":
    main()
