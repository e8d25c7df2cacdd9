"""``min_k.parquet`` against what it must be (docs/spec.md §15): a row for every task each
scoring model answered (but a model whose provider gives no prompt log-probabilities, named in
the manifest), each row's text the user message its transcript holds, and its Min-K% the mean
of the lowest log-probabilities it keeps, as many as its k% of its tokens."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from finbench.forecasters.min_k import text_sha256, user_text
from finbench.runlog.rundir import MIN_K
from finbench.runlog.transcripts import Transcripts

SHOWN = 10


def min_k_problems(run_dir: Path, config, manifest: dict) -> list[str]:
    path = run_dir / MIN_K
    skipped = {*manifest.get("skipped_models", {}), *manifest.get("stopped_models", {})}
    unsupported = manifest.get("min_k_unsupported") or {}
    scored = [m for m in config.models if getattr(m, "min_k_percent", None) is not None
              and m.name not in skipped]
    if not scored:
        return [f"{MIN_K}: no model of the config asks for Min-K%"] if path.is_file() else []
    if not path.is_file():
        return [f"{MIN_K}: missing ({', '.join(m.name for m in scored)} ask for Min-K%)"]
    table = pd.read_parquet(path)
    forecasts = pd.read_parquet(run_dir / "forecasts.parquet", columns=["task_id", "model"])
    problems = []
    transcripts = Transcripts(run_dir)
    try:
        for m in scored:
            mine = table[table["model"] == m.name]
            asked = set(forecasts.loc[forecasts["model"] == m.name, "task_id"])
            if m.name not in unsupported:
                problems += [f"{MIN_K}: {m.name} has no row of task {t}, which it answered"
                             for t in sorted(asked - set(mine["task_id"]))[:SHOWN]]
            texts = {e["task_id"]: e["messages"] for e in transcripts.each_last(m.name)}
            for row in mine.itertuples():
                problems += _row_problems(m, row, texts.get(row.task_id))
    finally:
        transcripts.close()
    return problems[:50]


def _row_problems(model, row, messages) -> list[str]:
    where = f"{MIN_K}: {model.name}, task {row.task_id}"
    if messages is None:
        return [f"{where}: no transcript holds the text it scores"]
    if text_sha256(user_text(messages) or "") != row.text_sha256:
        return [f"{where}: text_sha256 is not the digest of the user message sent"]
    if row.error is not None and not pd.isna(row.error):
        return []
    lowest = np.asarray(row.lowest if row.lowest is not None else [], float)
    want = max(1, math.ceil(row.tokens * row.k / 100)) if row.tokens else 0
    problems = []
    if row.k != model.min_k_percent:
        problems.append(f"{where}: k {row.k} is not the model's min_k_percent "
                        f"{model.min_k_percent}")
    if len(lowest) != want or (len(lowest) and np.any(np.diff(lowest) < 0)):
        problems.append(f"{where}: keeps {len(lowest)} log-probabilities, not its "
                        f"{want} lowest in order")
    elif len(lowest) and not math.isclose(math.fsum(lowest) / len(lowest), row.min_k,
                                          rel_tol=1e-12, abs_tol=0):
        problems.append(f"{where}: min_k {row.min_k} is not the mean of the "
                        f"log-probabilities it keeps ({math.fsum(lowest) / len(lowest)})")
    return problems
