"""``finbench leaderboard RUN... --out DIR``: one static page (``leaderboard.html``) and its
tables (``leaderboard.csv``, ``runs.csv``) from many runs, each track on a board of its own.

Only runs whose audit passes are on a board: every run is audited again (the caller's
``audit``, :func:`finbench.audit.audit_run` from the command), and a run that fails is
listed with its violations and left off. Each run's row gives its audit verdict, the
SHA-256 of its manifest (its receipt), its engine version and its data snapshot. A model is
named after its run (``RUN/MODEL``, the labels ``finbench paper`` gives).

Models are compared where their tasks are the same: a task of several runs whose labels
disagree (runs of different snapshots) is left out of every comparison and counted. Per
model: its own scored rows (N, mean Brier); on the tasks every model of the board scored
(``n_shared``), its mean Brier and its Brier skill against the reference (``--reference``;
by default the track's own, from the board's first run: the intraday track's ``coin``, as its
report's skill, and the event track's first reference, such as the market price) with a
bootstrap interval resampling whole clusters
(the track's: sessions, event groups); and, where the task sets differ, a difficulty-adjusted
Brier: the model's effect in a two-way fixed-effects fit of each scored row's Brier on its
model and its task (:func:`fixed_effects`), put on the scale of the mean task, beside the raw
score (on a complete design the two are equal).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from finbench.core.errors import RunError
from finbench.core.lookup import groups
from finbench.core.outputs import write_atomic
from finbench.reports.variants import describe as describe_variant
from finbench.runlog.rundir import finished_run, load_run_config, read_manifest, run_labels
from finbench.scoring import bootstrap
from finbench.tracks import plugin_of

REPLICATES, SEED, LEVEL = 2000, 20250115, 0.95
COLUMNS = ["track", "model", "run", "tools", "prompt", "n", "brier", "n_shared", "brier_shared",
           "bss_shared", "bss_lo", "bss_hi", "clusters", "brier_adjusted", "n_before_cutoff",
           "brier_before_cutoff", "n_after_cutoff", "brier_after_cutoff", "reference"]
RUN_COLUMNS = ["run", "track", "audit", "violations", "manifest_sha256", "engine_version",
               "snapshot_sha256", "tasks", "models"]


def fixed_effects(values: np.ndarray, model: np.ndarray, task: np.ndarray, *,
                  tol: float = 1e-13, most: int = 10_000) -> np.ndarray:
    """Each model's effect in the least-squares fit ``value = a[model] + b[task]`` (codes
    ``0..M-1`` and ``0..T-1``), by alternating projections (each side's means given the
    other's), on the scale of the mean task: ``a + mean(b)``. The fit is that of the
    dummy-variable regression; on a design where every model has every task, each model's
    effect is its mean. Models and tasks must form one connected set (a task shared)."""
    values = np.asarray(values, float)
    m, t = int(model.max()) + 1, int(task.max()) + 1
    per_model = np.bincount(model, minlength=m).astype(float)
    per_task = np.bincount(task, minlength=t).astype(float)
    a, b = np.zeros(m), np.zeros(t)
    for _ in range(most):
        a_new = np.bincount(model, weights=values - b[task], minlength=m) / per_model
        b = np.bincount(task, weights=values - a_new[model], minlength=t) / per_task
        done = np.max(np.abs(a_new - a)) < tol
        a = a_new
        if done:
            break
    return a + b.mean()


def leaderboard(run_dirs: list[str | Path], out: str | Path, *, audit,
                reference: str | None = None, echo=print) -> Path:
    """Audit the runs, build each track's board and write ``out``; returns its page.
    ``audit(run_dir)``: a run's violations (:func:`finbench.audit.audit_run`, which the
    command gives: the audit is a layer above the reports). ``reference``: the model every
    board's skill is against; None: each track's own (its plugin's
    :meth:`~finbench.tracks.base.TrackPlugin.board_reference` of the board's first run)."""
    labels = run_labels(run_dirs)
    runs, boards, references = [], {}, {}
    for label, run_dir in zip(labels, run_dirs, strict=True):
        run_dir = finished_run(run_dir)
        config, manifest = load_run_config(run_dir), read_manifest(run_dir)
        track = plugin_of(config)
        echo(f"auditing {label} ...")
        violations = audit(run_dir)
        runs.append({"run": label, "track": track.name,
                     "audit": "passed" if not violations else "failed",
                     "violations": "; ".join(violations[:3]) + (
                         f" (and {len(violations) - 3} more)" if len(violations) > 3 else ""),
                     "manifest_sha256": hashlib.sha256(
                         (run_dir / "manifest.json").read_bytes()).hexdigest(),
                     "engine_version": manifest.get("engine_version"),
                     "snapshot_sha256": (manifest.get("data") or {}).get("snapshot_sha256"),
                     "tasks": (manifest.get("tasks") or {}).get("tasks"),
                     "models": ", ".join(m.name for m in config.models
                                         if m.name not in (manifest.get("skipped_models") or {}))})
        if violations:
            echo(f"{label}: audit failed ({len(violations)} violation(s)): left off the board")
            continue
        rows = _board_columns(run_dir / "rows.parquet", track.cluster_column)
        agents = {m.name for m in config.models if getattr(m, "tools", None)
                  or m.kind == "mcp"}
        prompts = {m.name: describe_variant(m.prompt) for m in config.models
                   if getattr(m, "prompt", None) is not None}
        boards.setdefault(track.name, []).append((label, rows, track.cluster_column, agents,
                                                  prompts))
        references.setdefault(track.name, reference if reference is not None
                              else track.board_reference(config))
    if not any(r["audit"] == "passed" for r in runs):
        raise RunError("no run passed its audit: no board to make")
    tables, notes = [], []
    for name, parts in boards.items():
        table, note = _board(name, parts, references[name])
        tables.append(table)
        notes += note
    board = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=COLUMNS)
    run_table = pd.DataFrame(runs, columns=RUN_COLUMNS)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for note in notes:
        echo(note)
    write_atomic(out / "leaderboard.csv", lambda p: board.to_csv(
        p, index=False, float_format="%.10g", lineterminator="\n"))
    write_atomic(out / "runs.csv", lambda p: run_table.to_csv(p, index=False,
                                                              lineterminator="\n"))
    return _page(out / "leaderboard.html", board, run_table, notes)


def _board(track: str, parts: list, reference: str | None) -> tuple[pd.DataFrame, list[str]]:
    """One track's board from its runs' rows (label, rows.parquet's columns, cluster column,
    its agents, each language model's prompt variant in words). Tasks and entries are
    compared as integer codes (a task's code in the ids' sorted order), never text by text:
    two year-long runs' 3M rows took a minute as Python sets of ids."""
    frames, tools, prompts = [], {}, {}
    for label, rows, cluster, agents, variants in parts:
        prompts.update({f"{label}/{m}": v for m, v in variants.items()})
        memorised = (rows["possibly_memorised"].astype("boolean") if "possibly_memorised" in rows
                     else pd.array([pd.NA] * len(rows), "boolean"))
        frames.append(pd.DataFrame({
            "run": label, "entry": label + "/" + rows["model"].astype(str),
            "task_id": rows["task_id"].astype(str), "y": rows["y"].astype(float),
            "brier": rows["brier"].astype(float), "scored": rows["scored"].astype(bool),
            "cluster": rows[cluster].astype(str), "memorised": memorised}))
        tools.update({f"{label}/{m}": "yes" if m in agents else "no"
                      for m in rows["model"].astype(str).unique()})
    rows = pd.concat(frames, ignore_index=True)
    task, ids = pd.factorize(rows["task_id"], sort=True)  # codes in the ids' order
    notes = []
    y = rows["y"].to_numpy(float)
    known = ~np.isnan(y)
    labels = pd.Series(y[known]).groupby(task[known]).nunique()
    conflict = np.zeros(len(ids), bool)
    conflict[labels.index[labels.to_numpy() > 1]] = True
    if conflict.any():
        notes.append(f"{track}: {int(conflict.sum())} task(s) whose labels differ between "
                     "runs (other snapshots) are left out of every comparison")
    keep = ~conflict[task]
    rows, task = rows[keep], task[keep]
    entry, names = pd.factorize(rows["entry"])  # in the order entries first appear
    entries = names.tolist()
    last = np.full(len(entries), -1)  # each entry's last row names its run
    np.maximum.at(last, entry, np.arange(len(entry)))
    run_of = dict(zip(entries, rows["run"].to_numpy()[last].tolist(), strict=True))
    ref_entry = (None if reference is None
                 else next((e for e in entries if e.endswith("/" + reference)), None))
    if reference is None:
        notes.append(f"{track}: its first run names no reference (give --reference): no skill")
    elif ref_entry is None:
        notes.append(f"{track}: no model named {reference!r} in the runs: no skill")
    on_board = rows["scored"].to_numpy(bool)
    scored, task, entry = rows[on_board], task[on_board], entry[on_board]
    mine_rows = {code: at for code, at in enumerate(groups(entry, len(entries))) if len(at)}
    # the tasks every entry with a scored row scored: as many distinct entries as there are
    pairs = pd.unique(entry.astype(np.int64) * len(ids) + task)
    count = np.bincount(pairs % len(ids), minlength=len(ids)) if len(pairs) else (
        np.zeros(len(ids), np.int64))
    shared = (count == len(mine_rows)) & (count > 0)
    ref_code = entries.index(ref_entry) if ref_entry is not None else None
    ref_brier = None
    if ref_code in mine_rows:  # the reference's first scored row of each task, by task
        at = mine_rows[ref_code]
        tasks, first = np.unique(task[at], return_index=True)
        ref_brier = np.full(len(ids), np.nan)
        ref_brier[tasks] = scored["brier"].to_numpy()[at[first]]
    adjusted = _adjusted(scored, entries)
    brier = scored["brier"].to_numpy()
    cluster = pd.factorize(scored["cluster"], sort=True)[0]  # (sorted: as the texts are)
    out = []
    for code, e in enumerate(entries):
        at = mine_rows.get(code)
        mine = None if at is None else scored.iloc[at]
        record = {"track": track, "model": e, "run": run_of[e], "tools": tools.get(e, "no"),
                  "prompt": prompts.get(e, ""),
                  **_cutoff_sides(mine),
                  "n": 0 if mine is None else len(mine),
                  "brier": np.nan if mine is None else float(mine["brier"].mean()),
                  "n_shared": 0, "brier_shared": np.nan, "bss_shared": np.nan,
                  "bss_lo": np.nan, "bss_hi": np.nan, "clusters": 0,
                  "brier_adjusted": adjusted.get(e, np.nan), "reference": ref_entry or ""}
        if at is not None and shared.any():
            on = at[shared[task[at]]]
            on = on[np.argsort(task[on], kind="stable")]  # by task id, as the codes are
            record.update(n_shared=len(on), brier_shared=float(pd.Series(brier[on]).mean()))
            if ref_brier is not None:
                ci = bootstrap.skill_ci(brier[on], ref_brier[task[on]],
                                        pd.factorize(cluster[on], sort=True)[0],
                                        replicates=REPLICATES, seed=SEED, level=LEVEL)
                record.update(bss_shared=ci.estimate, bss_lo=ci.lower, bss_hi=ci.upper,
                              clusters=ci.clusters)
        out.append(record)
    return pd.DataFrame(out, columns=COLUMNS), notes


def _board_columns(path: Path, cluster: str) -> pd.DataFrame:
    """The columns of a run's per-row scores a board reads (of a year's 35: memory for what
    is compared alone)."""
    wanted = dict.fromkeys(["model", "task_id", "y", "brier", "scored", cluster])
    if "possibly_memorised" in pq.read_schema(path).names:  # (declared cutoffs only)
        wanted["possibly_memorised"] = None
    return pd.read_parquet(path, columns=list(wanted))


def _cutoff_sides(mine: pd.DataFrame | None) -> dict:
    """N and mean Brier of a model's scored rows on sessions up to its knowledge cutoff
    (possibly memorised) and after it; empty for a model that declares no cutoff."""
    out = {"n_before_cutoff": None, "brier_before_cutoff": np.nan, "n_after_cutoff": None,
           "brier_after_cutoff": np.nan}
    if mine is None or mine["memorised"].isna().all():
        return out
    for side, flag in (("before", True), ("after", False)):
        part = mine[(mine["memorised"] == flag).fillna(False).to_numpy(bool)]
        out[f"n_{side}_cutoff"] = len(part)
        out[f"brier_{side}_cutoff"] = float(part["brier"].mean()) if len(part) else np.nan
    return out


def _adjusted(scored: pd.DataFrame, entries: list[str]) -> dict[str, float]:
    """Each entry's difficulty-adjusted Brier (:func:`fixed_effects`) over every scored row."""
    if scored.empty:
        return {}
    model, names = pd.factorize(scored["entry"])
    task, _ = pd.factorize(scored["task_id"])
    effects = fixed_effects(scored["brier"].to_numpy(), model, task)
    return dict(zip(names, effects, strict=True))


def _page(path: Path, board: pd.DataFrame, runs: pd.DataFrame, notes: list[str]) -> Path:
    import jinja2

    from finbench.core.outputs import write_text
    from finbench.core.version import describe_version
    from finbench.reports.page import cells

    def shown(frame: pd.DataFrame) -> dict:
        columns, rows = cells(frame)
        return {"columns": columns, "rows": rows}

    env = jinja2.Environment(loader=jinja2.PackageLoader("finbench.reports", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    boards = []
    for track, part in board.groupby("track", sort=False):
        display = part.drop(columns=["track"]).assign(**{
            c: part[c].map(lambda v: "" if pd.isna(v) else f"{v:.4f}")
            for c in ("brier", "brier_shared", "bss_shared", "bss_lo", "bss_hi",
                      "brier_adjusted", "brier_before_cutoff", "brier_after_cutoff")})
        boards.append({"track": track, **shown(display)})
    page = env.get_template("leaderboard.html.j2").render(
        boards=boards, runs=shown(runs), notes=notes, drawn_by=describe_version(),
        level=f"{LEVEL:.0%}", replicates=REPLICATES)
    write_text(path, page)
    return path
