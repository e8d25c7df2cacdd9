"""The report's three-class tables: ``scores3.*`` with bootstrap intervals (whole clusters, as
for the binary scores) for Brier, RPS and the Brier skill against each three-class baseline,
and per-class (one-vs-rest) reliability bins."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from finbench.core.lookup import groups
from finbench.reports.stats import descriptive
from finbench.scoring.bootstrap import mean_ci, skill_ci
from finbench.scoring.calibration import reliability_table
from finbench.tracks.intraday.config import CLASS_BASELINE_KINDS, CLASSES, class_names
from finbench.tracks.intraday.report_data import RunData, cluster_codes_of
from finbench.tracks.intraday.scores3 import READ, class_rows, matched_tasks


def scored_class_rows(run_dir: Path, data: RunData) -> pd.DataFrame:
    """Every three-class model's scored rows (class, probabilities, per-row scores)."""
    names = [n for n in class_names(data.config)
             if n not in data.manifest.get("skipped_models", {})]
    forecasts = pq.read_table(run_dir / "forecasts.parquet", columns=READ,
                              filters=[("model", "in", names)]).to_pandas()
    labels = pd.read_parquet(run_dir / "labels.parquet")
    tasks = pd.read_parquet(run_dir / "tasks.parquet")
    rows = class_rows(forecasts, labels, tasks, clip=data.config.scores.log_loss_clip)
    return rows[rows["scored"]].reset_index(drop=True)


def with_intervals(table: pd.DataFrame, rows: pd.DataFrame, data: RunData) -> pd.DataFrame:
    """``table`` (``scores3``) with ``*_lo``/``*_hi`` for Brier, RPS and each ``bss3_*``, on
    the overall and horizon slices (tickers keep their point values), and each row's sessions
    and descriptive flag (the rule of every table: :func:`~finbench.reports.stats.descriptive`)."""
    rep = data.config.report
    boot = {"replicates": rep.bootstrap_replicates, "seed": rep.seed, "level": rep.level,
            "draws": data.draws}
    refs = [m.name for m in data.config.models if m.kind in CLASS_BASELINE_KINDS]
    clusters = cluster_codes_of(rows, rep.cluster)
    cells = _cells_of(rows, table)
    values = {col: rows[col].to_numpy() for col in ("brier", "rps")}
    task = pd.factorize(rows["task_id"])[0]
    sessions_of = pd.factorize(rows["session"])[0]
    none = np.zeros(0, np.int64)
    out = table.copy()
    out["sessions"], out["flag"] = 0, ""
    for i, r in table.iterrows():
        mine = cells[r["slice_kind"], r["slice"], r["model"]]
        seen = sessions_of[mine]
        out.loc[i, "sessions"] = sessions = len(np.unique(seen[seen >= 0]))
        out.loc[i, "flag"] = descriptive(len(mine), sessions, min_n=rep.min_n,
                                         min_clusters=rep.min_sessions)
        if r["slice_kind"] == "ticker":
            continue
        cl = clusters[mine]
        for col in ("brier", "rps"):
            ci = mean_ci(values[col][mine], cl, **boot)
            out.loc[i, f"{col}_lo"], out.loc[i, f"{col}_hi"] = ci.lower, ci.upper
        for ref in refs:
            theirs = cells.get((r["slice_kind"], r["slice"], ref), none)
            both, matched = matched_tasks(task[mine], task[theirs])
            if len(both):
                ci = skill_ci(values["brier"][mine[both]], values["brier"][theirs[matched]],
                              clusters[mine[both]], **boot)
                out.loc[i, f"bss3_{ref}_lo"], out.loc[i, f"bss3_{ref}_hi"] = ci.lower, ci.upper
    return out


def _cells_of(rows: pd.DataFrame, table: pd.DataFrame) -> dict:
    """The positions in ``rows`` of each (slice kind, slice, model) of ``table``, in the rows'
    order (none where no row is of it): the rows grouped once per kind of slice, not
    filtered once per cell."""
    names = list(dict.fromkeys([*table["model"], *rows["model"]]))
    model = pd.Series(rows["model"].to_numpy(object)).map(
        {n: i for i, n in enumerate(names)}).to_numpy(np.int64)
    none = np.zeros(0, np.int64)
    out: dict = {}
    for kind in dict.fromkeys(table["slice_kind"]):
        if kind == "overall":
            code, values = np.zeros(len(rows), np.int64), ["all"]
        else:
            code, values = pd.factorize(rows[kind])
            values = [str(v) for v in values]
        found = groups(np.where(code >= 0, code * len(names) + model, -1),
                       len(values) * len(names))
        for v, value in enumerate(values):
            for m, name in enumerate(names):
                out[kind, value, name] = found[v * len(names) + m]
        for r in table.loc[table["slice_kind"] == kind, ["slice", "model"]].itertuples():
            out.setdefault((kind, r.slice, r.model), none)
    return out


def class_reliability(rows: pd.DataFrame, *, bins: int) -> pd.DataFrame:
    """One-vs-rest reliability per model and class: bins of the class's forecast probability,
    their mean and the observed frequency of the class."""
    parts = []
    for model, mine in rows.groupby("model", sort=False):
        y = mine["cls"].to_numpy(np.int64)
        for k, name in enumerate(CLASSES):
            table = reliability_table((y == k).astype(float),
                                      mine[f"q_{name}"].to_numpy(float), bins=bins)
            parts.append(table.assign(model=model, cls=name))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def class_tables(data: RunData) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A single run's three-class table with intervals, and its reliability bins."""
    rows = scored_class_rows(data.run_dir, data)
    return (with_intervals(data.scores3, rows, data),
            class_reliability(rows, bins=data.config.report.bins))
