"""What a finished run of the event track prints: each model over every scored market, its
Brier skill against each reference, and the invalid answers' reasons."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from finbench.runlog.unscored import invalid_reasons


def render_event_summary(run_dir: Path) -> str:
    """What an event run prints when it ends: each model over every scored market, and its
    Brier skill against each reference on the markets both answered."""
    scores = pd.read_parquet(Path(run_dir) / "scores.parquet")
    overall = scores[scores["slice_kind"] == "overall"]
    lines = ["All scored markets (n, YES, Brier [95% CI by event group], log loss, validity):"]
    for r in overall.itertuples(index=False):
        ci = "" if np.isnan(r.brier_lo) else f" [{r.brier_lo:.4f}, {r.brier_hi:.4f}]"
        lines.append(f"  {r.model:<24} n={r.n:<4} YES={r.positives:<4} Brier {r.brier:.4f}{ci}"
                     f"  log loss {r.log_loss:.4f}  validity {r.validity:.3f}"
                     + ("  (no positive cases)" if r.no_positive_cases else ""))
    skill = pd.read_parquet(Path(run_dir) / "skill.parquet")
    skill = skill[skill["slice_kind"] == "overall"]
    if len(skill):
        lines.append("Brier skill vs each reference (same markets; n, model and reference "
                     "Brier):")
        for r in skill.itertuples(index=False):
            value = "undefined (" + r.bss_undefined + ")" if r.bss_undefined else f"{r.bss:+.4f}"
            lines.append(f"  {r.model:<24} vs {r.reference:<20} n={r.n:<4} {value}  "
                         f"({r.brier_model:.4f} vs {r.brier_reference:.4f})")
    counts = {r.model: (int(r.n_invalid), int(r.tasks - r.n_error))
              for r in overall.itertuples(index=False) if not r.kind.startswith("in_sample")}
    return "\n".join(lines + invalid_reasons(run_dir, counts))
