"""What a finished run says it could not score, beside its tables: the invalid answers of each
model, counted by reason (the forecast table keeps each one's raw text and reason)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from finbench.core.location import filesystem, join

SHOWN_REASONS = 3  # the most frequent reasons a model's line names; the rest are counted


def invalid_reasons(run_dir: str | Path, invalid: dict[str, tuple[int, int]]) -> list[str]:
    """Lines naming, per model with invalid answers (``invalid``: model -> (invalid answers,
    answers)), its most frequent reasons with their counts, read from ``forecasts.parquet``
    (the row groups of those models only: a model that answered validly costs nothing)."""
    wanted = {m: counts for m, counts in invalid.items() if counts[0] > 0}
    if not wanted:
        return []
    fs, root = filesystem(run_dir)
    table = pq.read_table(join(root, "forecasts.parquet"), filesystem=fs,
                          columns=["model", "valid", "answer_status", "error"],
                          filters=[("model", "in", sorted(wanted))])
    answered = pc.and_(pc.invert(table["valid"]), pc.equal(table["answer_status"], "answered"))
    table = table.filter(answered)
    lines = ["Invalid answers (left out of that model's scores; forecasts.parquet keeps each "
             "one's raw text and reason):"]
    for model, (count, answers) in wanted.items():
        errors = table.filter(pc.equal(table["model"], model))["error"]
        reasons = sorted(pc.value_counts(errors).to_pylist(),
                         key=lambda r: (-r["counts"], str(r["values"])))
        shown = "; ".join(f"{r['counts']} {_short(r['values'])}"
                          for r in reasons[:SHOWN_REASONS])
        more = len(reasons) - SHOWN_REASONS
        lines.append(f"  {model}: {count} of {answers} answers invalid: {shown}"
                     + (f"; and {more} other reason(s)" if more > 0 else ""))
    return lines


def _short(reason, limit: int = 160) -> str:
    text = " ".join(str(reason).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
