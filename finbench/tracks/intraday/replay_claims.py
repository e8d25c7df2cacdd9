"""What a replay file claimed of its rows against what FinBench computes (the report's
``replay_claims`` and ``replay_disagreements``): a file may carry its own label (``y``),
return (``r``) and per-row scores (``brier``, ``log_loss``, ``winkler``), as the paper's
pilot CSV does; FinBench never scores with them, and says here which rows disagree with
its own values (the label from the store's bars, the scores from the stated answer).

A claim agrees when it is within ``ABS + REL * |FinBench's|`` of FinBench's value (a flag
``y`` exactly); a claim on a row FinBench does not score (an invalid answer, a label not
``ok``) disagrees, FinBench's value then empty. ``composite_score`` has no per-row rule in
FinBench (``[scores] composite`` weighs a model's mean scores): it is counted, not compared.
"""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq

from finbench.forecasters.replay import CLAIM_FIELDS

ABS, REL = 1e-9, 1e-6
COMPARED = ("y", "r", "brier", "log_loss", "winkler")  # the rows' own columns
NOT_COMPARED = {"composite_score": "not compared: FinBench has no per-row composite "
                                   "([scores] composite weighs a model's mean scores)"}
SUMMARY = ["model", "claim", "rows", "disagree", "max_abs_diff", "first", "note"]
DETAIL = ["model", "task_id", "claim", "claimed", "finbench"]


def replay_claims(run_dir, config, rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(a row per replay model and claimed column: rows claiming it, how many disagree, the
    largest difference, the first disagreeing tasks; every disagreeing row). ``rows``: the
    run's scored rows (task, model, label and scores); both empty without claims."""
    summary, detail = [], []
    for model in (m for m in config.models if m.kind == "replay"):
        claims = _claims(run_dir, model.name)
        if claims.empty:
            continue
        mine = rows[rows["model"] == model.name].set_index("task_id")
        for claim in (c for c in CLAIM_FIELDS if c in claims.columns):
            claimed = claims[claim].dropna()
            if claim in NOT_COMPARED:
                summary.append({"model": model.name, "claim": claim, "rows": len(claimed),
                                "disagree": None, "max_abs_diff": None, "first": "",
                                "note": NOT_COMPARED[claim]})
                continue
            ours = mine[claim].reindex(claimed.index)
            ours = ours.astype("float64") if claim == "y" else ours.astype(float)
            theirs = pd.to_numeric(claimed, errors="coerce")
            diff = (theirs - ours).abs()
            if claim == "y":
                agree = diff.eq(0)
            else:
                agree = diff.le(ABS + REL * ours.abs())
            bad = ~agree.fillna(False).to_numpy(bool)
            where = claimed.index[bad]
            summary.append({
                "model": model.name, "claim": claim, "rows": len(claimed),
                "disagree": int(bad.sum()),
                "max_abs_diff": float(diff[bad].max()) if bad.any() and diff[bad].notna().any()
                else (0.0 if len(claimed) else None),
                "first": ", ".join(where[:3]) + (", ..." if len(where) > 3 else ""),
                "note": _note(claimed[bad], ours[bad])})
            detail += [{"model": model.name, "task_id": t, "claim": claim,
                        "claimed": str(claimed[t]), "finbench": "" if pd.isna(ours[t])
                        else repr(float(ours[t]))} for t in where]
    return (pd.DataFrame(summary, columns=SUMMARY), pd.DataFrame(detail, columns=DETAIL))


def _claims(run_dir, model: str) -> pd.DataFrame:
    """A replay model's claims per task (the row's detail, ``claimed``), indexed by task."""
    table = pq.read_table(run_dir / "forecasts.parquet", columns=["task_id", "detail"],
                          filters=[("model", "=", model)]).to_pandas()
    found = {t: json.loads(d).get("claimed") for t, d in zip(table["task_id"], table["detail"],
                                                             strict=True) if isinstance(d, str)}
    found = {t: c for t, c in found.items() if c}
    return pd.DataFrame.from_dict(found, orient="index") if found else pd.DataFrame()


def _note(claimed: pd.Series, ours: pd.Series) -> str:
    """Why rows disagree, when it is one reason: FinBench does not score them, or the file's
    cells are no numbers."""
    if not len(claimed):
        return ""
    text = pd.to_numeric(claimed, errors="coerce").isna()
    if text.all():
        return "the file's cells are no numbers"
    if ours.isna().all():
        return "FinBench does not score these rows (an invalid answer or a label not ok)"
    return ""
