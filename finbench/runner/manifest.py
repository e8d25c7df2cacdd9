"""What a run writes about itself: the manifest's first content and the printed summary."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from finbench.core.config import RunConfig, baseline_names, interval_reference
from finbench.core.version import code_version
from finbench.reports.tables import render_text, summary_frame
from finbench.reports.writers import fmt
from finbench.runlog.rundir import RUN_FORMAT
from finbench.runner.unscored import invalid_reasons


def new_manifest(config: RunConfig, source: dict, data: dict, facts: dict,
                 started: str) -> dict:
    """The manifest as the label pass leaves it (docs/spec.md §9): versions, the config and
    its source, the data snapshot (``data``: the track's facts), the tasks' facts."""
    return {
        "format": RUN_FORMAT,
        "version": 1,
        **code_version(),
        "python": sys.version.split()[0],
        **source,
        "config": json.loads(config.model_dump_json()),
        "data": data,
        "models": [json.loads(m.model_dump_json()) for m in config.models],
        "tasks": facts,
        "started_at": started,
    }


def shard_field(shard) -> list[str] | None:
    return None if shard is None else [str(shard[0]), str(shard[1])]


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


def render_event_summary(run_dir: Path, scores: pd.DataFrame) -> str:
    """What an event run prints when it ends: each model over every scored market, and its
    Brier skill against each reference on the markets both answered."""
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


def describe_code(version: dict) -> str:
    """``FinBench 0.1.0 (git 0123456789ab)``: a :func:`code_version` as a run says it."""
    return (f"FinBench {version.get('package_version')} "
            f"(git {str(version.get('git_revision'))[:12]})")


def same_finbench(recorded: dict, ours: dict) -> bool:
    """Whether a FinBench as recorded (a manifest, an entry of its ``code_revisions``, a
    worker's :func:`code_version`) is ``ours`` (a :func:`code_version`): the same package
    version and git revision."""
    return all(recorded.get(k) == v for k, v in ours.items())


def code_revisions(manifest: dict) -> list[dict]:
    """The FinBench versions that made a run, first to last, each with when it took over: the
    manifest's ``code_revisions``, or (a run made before they were listed, or one whose
    manifest is new) its own version from its start."""
    return manifest.get("code_revisions") or [
        {"package_version": manifest.get("package_version"),
         "git_revision": manifest.get("git_revision"), "at": manifest.get("started_at")}]


def made_by(manifest: dict) -> str | None:
    """What a command re-deriving a run (the audit) says of the FinBench that made it, when
    that is not only the one running now: each of its :func:`code_revisions` in turn, and
    this one."""
    ours = code_version()
    made = code_revisions(manifest)
    if all(same_finbench(m, ours) for m in made):
        return None
    by = ", then ".join(f"{describe_code(m)} from {m.get('at')}" for m in made)
    return (f"made by {by}; derived again with this {describe_code(ours)}: rows another "
            "FinBench computes otherwise are named as violations")


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


def render_finished(run_dir: str | Path) -> list[str]:
    """The tables a finished run of the intraday track prints when it ends, each a block of
    lines: its binary models' summary, and the three-class one when it has such models; read
    from its folder (local, or on object storage), so a merge prints what the run in one
    process prints."""
    import io

    from finbench.core.config import binary_names
    from finbench.core.location import read_file
    from finbench.runlog.rundir import MANIFEST

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
