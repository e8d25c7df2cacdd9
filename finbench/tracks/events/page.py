"""``RUN/report.html`` of an event run (:mod:`finbench.reports.page`): the run's header, every
table of the report with its caption, the figures, and a per-sample browser: filter by
model, category, outcome and answer status; each sample shows the market and its question,
``t0``, the market's price at ``t0``, the outcome, the posts retrieval found before ``t0``
(ids, times, scores), the answer and its scores, and a language model's exchange as sent."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from finbench.core.config import PROMPTED_KINDS
from finbench.reports import page

MAX_SAMPLES = 20_000  # rows in the browser (the first, in the run's order); the rest counted
MAX_PROMPTS = 2_000   # of them, the language-model rows whose exchange is embedded
ORDER = ("event_scores", "event_skill", "event_paired_brier", "event_scores_by_category",
         "event_scores_by_retrieval",
         "event_scores_by_slice", "event_skill_by_slice",
         "event_skill_by_retrieval", "event_scores_by_group", "event_tools_effect",
         "event_agents", "event_retrieval_effect", "event_prompt_variants",
         "event_memorisation", "event_recall_probes", "event_min_k", "event_market_gap",
         "event_reliability",
         "event_corp", "event_exclusions")
TITLES = {"event_scores": "Scores", "event_skill": "Skill",
          "event_prompt_variants": "Prompt variants", "event_memorisation": "Memorisation",
          "event_retrieval_effect": "What retrieval adds",
          "event_scores_by_slice": "Scores by declared slice",
          "event_recall_probes": "Recall probes", "event_paired_brier": "Paired Brier",
          "event_min_k": "Min-K% probability",
          "event_skill_by_slice": "Skill by declared slice",
          "event_tools_effect":
          "What tools add", "event_agents": "Agents", "event_market_gap": "Gap to the market",
          "event_reliability": "Reliability", "event_corp": "CORP reliability",
          "event_exclusions": "Exclusions",
          "event_scores_by_category": "Scores by category",
          "event_scores_by_retrieval": "Scores by retrieval",
          "event_skill_by_retrieval": "Skill by retrieval",
          "event_scores_by_group": "Scores by event group"}
FILTERS = ["model", "category", "outcome", "answer"]
LIST = ["market", "t0", "model", "p_yes", "outcome", "answer", "Brier"]
NUMERIC = [3, 6]


def write_event_html(run_dir: Path, config, manifest: dict, shown: dict,
                     figures: list[Path]) -> Path:
    """Write ``run_dir/report.html`` from the tables as shown (name -> (frame, caption)) and
    the figures' PNG files; returns its path."""
    tasks = pd.read_parquet(run_dir / "tasks.parquet")
    labels = pd.read_parquet(run_dir / "labels.parquet")
    samples, total = _samples(run_dir, config, tasks, labels)
    note = (f"The first {len(samples):,} of {total:,} forecast rows, in the run's order (every "
            "scored row is in rows.parquet)." if total > len(samples)
            else f"Every forecast row of the run ({total:,}), one per market and model.")
    ok = int((labels["status"] == "ok").sum())
    extra = [("markets", f"{tasks['market_id'].nunique()}, t0 from {tasks['t0'].min()} to "
                         f"{tasks['t0'].max()}" if len(tasks) else ""),
             ("labels", f"{ok} scored ({int(labels.loc[labels['status'] == 'ok', 'y'].sum())} "
                        "YES)")]
    names = {m.name for m in config.models} - set(manifest.get("skipped_models") or {})
    return page.render(
        run_dir / "report.html", title=Path(run_dir).name,
        synthetic=bool((manifest.get("data") or {}).get("synthetic")),
        facts=page.run_facts(manifest, tasks=len(tasks), extra=extra),
        models=page.model_rows(manifest, names),
        tables=page.sections(shown, ORDER, TITLES), figures=figures, samples=samples,
        samples_note=note, filters=FILTERS, sample_columns=LIST, numeric=NUMERIC)


def _samples(run_dir: Path, config, tasks: pd.DataFrame, labels: pd.DataFrame
             ) -> tuple[list[dict], int]:
    """The browser's rows (the forecast table's first :data:`MAX_SAMPLES`) and how many rows
    the run has."""
    forecasts = pd.read_parquet(run_dir / "forecasts.parquet", columns=[
        "task_id", "model", "kind", "p_up", "valid", "answer_status", "error", "raw",
        "rationale"])
    total = len(forecasts)
    forecasts = forecasts.head(MAX_SAMPLES)
    scored = pd.read_parquet(run_dir / "rows.parquet", columns=["task_id", "model", "brier",
                                                                "log_loss"])
    frame = (forecasts.merge(tasks[["task_id", "market_id", "t0", "category"]], on="task_id",
                             how="left")
             .merge(labels[["task_id", "status", "y", "outcome", "price", "price_time"]],
                    on="task_id", how="left")
             .merge(scored, on=["task_id", "model"], how="left"))
    questions = _questions(config)
    retrieved = _retrieved(run_dir, frame["task_id"])
    prompted = frame.loc[frame["kind"].isin(PROMPTED_KINDS), ["model", "task_id"]].head(
        MAX_PROMPTS)
    exchanges = page.exchanges(run_dir, prompted.itertuples(index=False))
    out = []
    for r in frame.itertuples(index=False):
        answer = "error" if r.answer_status == "error" else "valid" if r.valid else "invalid"
        outcome = ("YES" if r.y == 1 else "NO") if r.status == "ok" else str(r.status)
        posts = retrieved.get(r.task_id, [])
        head = [f"market {r.market_id}: {questions.get(r.market_id, '(question not in the store)')}",
                f"asked at t0 {r.t0}; category {r.category}",
                f"market price at t0: {_said(r.price)}"
                + (f" (as of {r.price_time})" if pd.notna(r.price_time) else ""),
                f"outcome: {outcome} (label {r.status})",
                f"answer: {answer}" + (f" ({_text(r.error)})" if _text(r.error) else "")
                + f"; p_yes {_said(r.p_up)}",
                f"scores: Brier {_said(r.brier)}, log loss {_said(r.log_loss)}",
                f"retrieval found before t0: {len(posts)} post(s) (a model with retrieval "
                "is shown them)", *posts]
        out.append({"task": r.task_id, "model": r.model, "category": str(r.category),
                    "outcome": outcome, "answer": answer,
                    "cells": [str(r.market_id), str(r.t0), r.model, _fmt(r.p_up), outcome,
                              answer, _fmt(r.brier)],
                    "head": head, "raw": _text(r.raw), "rationale": _text(r.rationale),
                    "messages": exchanges.get((r.model, r.task_id))})
    return out, total


def _retrieved(run_dir: Path, task_ids: pd.Series) -> dict[str, list[str]]:
    """Per task of ``task_ids`` that retrieval found posts for, a line for each post, best
    first; sorted once and grouped in one pass (a sort per task took 8 s for 20,000)."""
    path = run_dir / "retrieval.parquet"
    if not path.is_file():
        return {}
    posts = pd.read_parquet(path)
    posts = posts[posts["task_id"].isin(task_ids.unique())].sort_values(
        ["task_id", "rank"], kind="stable")
    lines: dict[str, list[str]] = {}
    for task, rank, post, at, score in zip(posts["task_id"], posts["rank"], posts["post_id"],
                                           posts["created_utc"], posts["score"], strict=True):
        lines.setdefault(task, []).append(f"  {rank}. {post} at {at} (score {score:.3f})")
    return lines


def _questions(config) -> dict[str, str]:
    """Each market's question, from the run's store (none where it is no longer there)."""
    path = Path(str(config.data.store)) / "markets.parquet"
    if not path.is_file():
        return {}
    markets = pd.read_parquet(path, columns=["market_id", "question"])
    return dict(zip(markets["market_id"], markets["question"], strict=True))


def _fmt(value) -> str:
    return "" if value is None or pd.isna(value) else f"{float(value):.4f}"


def _said(value) -> str:
    return "n/a" if value is None or pd.isna(value) else f"{float(value):.4f}"


def _text(value) -> str:
    return "" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)
