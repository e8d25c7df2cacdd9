"""What a finished run of the intraday track prints: its binary models' summary (by horizon
and over all horizons), the three-class one when it has such models, and the invalid answers'
reasons; read from its folder (local, or on object storage), so a merge prints what the run
in one process prints."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd

from finbench.core.location import read_file
from finbench.reports.writers import fmt
from finbench.runlog.rundir import MANIFEST
from finbench.runlog.unscored import invalid_reasons
from finbench.tracks.intraday.config import RunConfig, baseline_names, binary_names, interval_reference
from finbench.tracks.intraday.tables import render_text, summary_frame


def render_summary(scores: pd.DataFrame, config: RunConfig, names: list[str]) -> str:
    """The tables a run prints when it ends: by horizon and over all horizons."""
    baselines = [b for b in baseline_names(config) if b in names]
    ref = interval_reference(config)
    parts = []
    for kind, title in (("horizon", "By horizon"), ("overall", "All horizons")):
        frame = summary_frame(scores, baselines=baselines, slice_kind=kind,
                              interval_reference=ref)
        parts.append(f"{title}:\n{render_text(frame)}")
    note = ("BS and Winkler: lower is better; BSS/WSS = 1 - S_model/S_baseline on the (n) paired "
            "rows both scored; 'undef' = zero reference score or no paired rows; n/a = the "
            "forecaster gives no interval (scored on its probability alone). p fallback: "
            "probabilities from a declared fallback rule; Int. abstained: intervals left out "
            "for lack of history.")
    return "\n\n".join(parts) + "\n" + note


def render_finished(run_dir: str | Path) -> list[str]:
    """The tables a finished run of the intraday track prints when it ends, each a block of
    lines: its binary models' summary, and the three-class one when it has such models; read
    from its folder (local, or on object storage), so a merge prints what the run in one
    process prints."""
    manifest = json.loads(read_file(run_dir, MANIFEST))
    config = RunConfig.model_validate(manifest["config"])
    gone = {*(manifest.get("skipped_models") or {}), *(manifest.get("stopped_models") or {})}
    names = [m.name for m in config.models
             if m.name not in gone and m.name in binary_names(config)]
    scores = pd.read_parquet(io.BytesIO(read_file(run_dir, "scores.parquet")))
    parts = [render_summary(scores, config, names)]
    invalid = answer_counts(scores)
    if "scores3.parquet" in (manifest.get("files") or {}):
        scores3 = pd.read_parquet(io.BytesIO(read_file(run_dir, "scores3.parquet")))
        parts.append(render_class_summary(scores3))
        invalid.update(answer_counts(scores3))
    lines = invalid_reasons(run_dir, {m: invalid[m] for m in config_order(config, invalid)})
    return parts + (["\n".join(lines)] if lines else [])


def render_class_summary(table: pd.DataFrame) -> str:
    """The three-class scores a run prints when it ends (over all horizons)."""
    overall = table[table["slice_kind"] == "overall"]
    refs = [c[5:-2] for c in overall.columns if c.startswith("bss3_") and c.endswith("_n")]
    shown = pd.DataFrame({
        "Model": overall["model"], "N": overall["n"],
        "Brier3": overall["brier"].map(fmt),
        "RPS": overall["rps"].map(fmt),
        "Acc.": overall["accuracy"].map(lambda v: fmt(v, 2)),
        **{f"BSS3_{r} (n)": [f"{fmt(v)} ({int(n)})" for v, n in zip(
            overall[f"bss3_{r}"], overall[f"bss3_{r}_n"], strict=True)] for r in refs},
        "Valid": [f"{v}/{t - e}" for v, t, e in zip(overall["n_valid"], overall["n_tasks"],
                                                     overall["n_error"], strict=True)]})
    return ("Three classes (down, flat, up), all horizons:\n" + render_text(shown)
            + "\nBrier3 and RPS: lower is better; BSS3 = 1 - Brier3_model / Brier3_reference on "
            "the (n) paired rows both scored; 'undef' = zero reference score or no paired rows.")


def answer_counts(scores: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Per model of a scores table: (invalid answers, answers), from its overall row (answers:
    the tasks asked less the calls without an answer)."""
    if scores.empty:  # (a run of three-class models alone has no binary scores)
        return {}
    overall = scores[scores["slice_kind"] == "overall"]
    answers = overall["n_tasks"] - overall["n_error"]
    return {m: (int(a - v), int(a)) for m, a, v in zip(
        overall["model"], answers, overall["n_valid"], strict=True)}


def config_order(config: RunConfig, names) -> list[str]:
    """``names`` in the config's order of models."""
    return [m.name for m in config.models if m.name in names]
