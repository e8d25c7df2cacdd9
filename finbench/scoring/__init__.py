"""The one scoring core every track uses: per-row rules (:mod:`.rules`, validated; their
unvalidated numpy kernels in :mod:`.kernels`), rules over ordered classes
(:mod:`.multiclass`), the cluster bootstrap (:mod:`.bootstrap`) and calibration
(:mod:`.calibration`), all numpy over plain arrays. A track's score tables of a run are its
own (``finbench/tracks/<name>/``)."""

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
