"""Scores: the one scoring core every track uses (per-row rules in :mod:`.rules`,
multiclass rules, the cluster bootstrap, calibration, decision scores), and the intraday
track's score tables of a run directory (:mod:`.run`, which writes them under the run's
lock). The rules and the bootstrap are numpy over plain arrays."""

from finbench.scoring.rules import (
    accuracy_score,
    brier_loss,
    coverage_score,
    interval_width,
    kelly_growth_score,
    log_loss,
    skill,
    winkler_loss,
)

__all__ = ["accuracy_score", "brier_loss", "coverage_score", "interval_width",
           "kelly_growth_score", "log_loss", "skill", "winkler_loss"]
