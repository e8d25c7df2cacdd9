"""The Table-1-shaped summary (Model, N, Acc., BS, BSS per baseline, Cov@80, Winkler@80, valid)."""

from __future__ import annotations

import pandas as pd

from finbench.reports.writers import fmt


def _fmt(value, digits=3) -> str:
    """A number as :func:`~finbench.reports.writers.fmt` shows it (an integer too, with
    decimals)."""
    return fmt(None if value is None else float(value), digits)


def _skill(rec: dict, key: str) -> str:
    """A skill with the number of paired rows it is computed on: ``0.012 (172)``."""
    return f"{_fmt(rec[key])} ({int(rec[f'{key}_n'])})"


def summary_frame(scores: pd.DataFrame, *, baselines: list[str], slice_kind: str = "overall",
                  interval_reference: str | None = None) -> pd.DataFrame:
    """Display columns for one slice kind, formatted as text. Each skill shows, in brackets,
    the paired rows it is computed on; interval scores read ``n/a`` for a forecaster that
    gives no interval."""
    part = scores[scores["slice_kind"] == slice_kind]
    errors = "n_error" in part and bool(part["n_error"].gt(0).any())
    rows = []
    for rec in part.to_dict("records"):
        row = {}
        if slice_kind != "overall":
            row[slice_kind.capitalize()] = rec["slice"]
        row.update({"Model": rec["model"], "N": rec["n"], "Ties": rec["ties"],
                    "Acc.": _fmt(rec["accuracy"], 2), "BS": _fmt(rec["brier"])})
        for b in baselines:
            row[f"BSS_{b} (n)"] = _skill(rec, f"bss_{b}")
        na = rec["n_valid"] > 0 and rec["n_interval_not_applicable"] == rec["n_valid"]
        row["N int."] = "n/a" if na else str(rec["n_interval"])
        row["Cov@80"] = "n/a" if na else _fmt(rec["coverage"], 2)
        row["Winkler@80"] = "n/a" if na else _fmt(rec["winkler"], 4)
        if interval_reference:
            row[f"WSS_{interval_reference} (n)"] = "n/a" if na else _skill(
                rec, f"wss_{interval_reference}")
        row["Valid"] = f"{rec['n_valid']}/{rec['n_tasks'] - rec.get('n_error', 0)}"
        if errors:  # calls that got no answer: not in validity, asked again by the next run
            row["Errors"] = str(rec.get("n_error", 0))
        row["p fallback"] = str(rec["n_p_fallback"])
        row["Int. abstained"] = str(rec["n_interval_abstained"])
        if "composite_secondary" in rec:
            row["Comp.(secondary)"] = _fmt(rec["composite_secondary"])
        rows.append(row)
    return pd.DataFrame(rows)


def render_text(frame: pd.DataFrame) -> str:
    """A plain fixed-width table."""
    if frame.empty:
        return "(no rows)"
    cols = list(frame.columns)
    width = {c: max(len(c), *(len(str(v)) for v in frame[c])) for c in cols}
    lines = ["  ".join(c.ljust(width[c]) for c in cols)]
    lines.append("  ".join("-" * width[c] for c in cols))
    for rec in frame.itertuples(index=False):
        lines.append("  ".join(str(v).ljust(width[c]) for c, v in zip(cols, rec, strict=True)))
    return "\n".join(lines)
