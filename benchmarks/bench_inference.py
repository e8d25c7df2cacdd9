"""Coverage of a known paired difference by the Diebold-Mariano (Newey-West) interval and by
the session bootstrap, on simulated benchmarks whose rows are correlated within a session.

Each simulated benchmark has S sessions of 9 rows; a row's loss differential is the true
difference (0.02) plus a session effect shared by the session's rows and a row's own noise,
with within-session correlation rho = 0.3. The DM interval holds the values its test at 5%
keeps, over the sessions' mean differentials (``finbench.scoring.inference.diebold_mariano``:
Newey-West at its default lags, Harvey-Leybourne-Newbold's form); the session bootstrap is
the reports' ``paired_difference``. Prints each one's 95% coverage (target 92-98% at >= 20 sessions) and
the share of benchmarks whose MDE (80% power) is below the true difference. The sessions are
independent here: what the Newey-West variance costs where no serial correlation is. Run:
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

ROWS, SIMS, REPLICATES, RHO, TRUTH, SD = 9, 2000, 1000, 0.3, 0.02, 0.05
SESSION_COUNTS = (20, 40, 80)


def coverage(sessions: int, seed: int = 7, lags: int | None = None
             ) -> tuple[float, float, float]:
    """(DM interval coverage at ``lags``, default :func:`default_lags`, session-bootstrap
    coverage, share with MDE below the truth)."""
    rng = np.random.default_rng(seed)
    session = np.repeat(np.arange(sessions), ROWS)
    hits_dm = hits_boot = detectable = 0
    for k in range(SIMS):
        diff = (TRUTH + rng.normal(0, SD * math.sqrt(RHO), sessions)[session]
                + rng.normal(0, SD * math.sqrt(1 - RHO), len(session)))
        # the DM interval covers the truth where the test of mean (d - truth) = 0 keeps it
        hits_dm += diebold_mariano(series_of(diff - TRUTH, session), lags)[1] >= 0.05
        ci, _ = paired_difference(diff, np.zeros(len(diff)), session, replicates=REPLICATES,
                                  seed=k)
        hits_boot += ci.lower <= TRUTH <= ci.upper
        detectable += mde(diff, session) < TRUTH
    return hits_dm / SIMS, hits_boot / SIMS, detectable / SIMS


def main() -> None:
    for sessions in [int(a) for a in sys.argv[1:]] or SESSION_COUNTS:
        dm, boot, found = coverage(sessions)
        cube = coverage(sessions, lags=math.ceil(sessions ** (1 / 3)))[0]
        print(f"{SIMS} simulated benchmarks, {sessions} sessions x {ROWS} rows, rho {RHO}, "
              f"true difference {TRUTH}: 95% coverage DM-HAC {dm:.1%} at "
              f"{default_lags(sessions)} lags ({cube:.1%} at ceil(S^(1/3)) = "
              f"{math.ceil(sessions ** (1 / 3))}), session bootstrap {boot:.1%} (target "
              f"92-98%); MDE (80% power) below the truth in {found:.0%}")


if __name__ == "__main__":
    main()
