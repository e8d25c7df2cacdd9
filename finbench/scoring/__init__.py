"""Scores: per-row rules and per-model aggregates; pure numpy over result tables."""

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
