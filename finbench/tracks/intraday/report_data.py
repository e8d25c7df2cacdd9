"""The intraday report's tables computed from a run's stored rows: scores with
session-bootstrap CIs, paired differences, calibration, coverage by horizon and the decision
layer. No drawing here."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from finbench.core.errors import RunError
from finbench.core.lookup import groups, positions
from finbench.reports.stats import descriptive
from finbench.runlog.rundir import finished_run
from finbench.runlog.stances import judged_stances
from finbench.scoring.bootstrap import (
    Draws,
    cell_mean_cis,
    cell_skill_cis,
    paired_difference,
    skill_ci,
)
from finbench.scoring.calibration import calibration
from finbench.scoring.inference import diebold_mariano, holm, mde, series_of
from finbench.tracks.intraday.config import (
    BASELINE_KINDS,
    CUTOFF_SLICES,
    RunConfig,
    binary_names,
    cutoff_slice,
    knowledge_cutoffs,
)
from finbench.tracks.intraday.decision import decision_table
from finbench.tracks.intraday.score_cells import NOT_APPLICABLE, SCORED_COLUMNS, row_scores
from finbench.tracks.intraday.stance import stance


def default_reference(baselines: list[str]) -> str | None:
    """The model a run's Brier skill is relative to when none is named: its ``coin`` (or,
    with no coin, its first baseline); the report's and the leaderboard's rule."""
    return "coin" if "coin" in baselines else (baselines[0] if baselines else None)


@dataclass
class RunData:
    """What a report reads from one run directory."""

    name: str
    config: RunConfig
    manifest: dict
    rows: pd.DataFrame
    models: list[str]
    baselines: list[str]
    scores: pd.DataFrame | None = None  # the run's scores table (``scores.parquet``)
    task_ids: pd.Series | None = None  # the run's tasks (``tasks.parquet``)
    references: dict[str, str] | None = None  # each model's skill reference, if not the coin
    caption: str | None = None  # the caption facts, when not this run's own (pooled runs)
    label_counts: dict | None = None  # of the run's tasks: ok labels, their ups and ties
    scores3: pd.DataFrame | None = None  # the three-class scores (``scores3.parquet``)
    run_dir: Path | None = None  # where the run lies (a single run's report)
    class_bins: pd.DataFrame | None = None  # pooled runs: their three-class reliability bins
    # (their ``scores3`` then already carries its intervals)
    draws: Draws = field(default_factory=Draws, repr=False, compare=False)  # the bootstrap's
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    def reference(self, model: str) -> str | None:
        """The model a model's Brier skill is relative to: the coin of its own run (or, with
        no coin, the run's first baseline)."""
        if self.references is not None:
            return self.references.get(model)
        return default_reference(self.baselines)

    def cluster_codes(self, kind: str) -> np.ndarray:
        """Each row's bootstrap cluster (``"session"`` or ``"session_ticker"``) as an integer,
        numbered in the texts' sorted order, so that clusters line up in a bootstrap as the
        texts would; computed once per kind."""
        key = ("clusters", kind)
        if key not in self._memo:
            self._memo[key] = cluster_codes_of(self.rows, kind)
        return self._memo[key]

    def values(self, column: str, dtype=float) -> np.ndarray:
        """A column of the rows as a read-only array of ``dtype``, made once (a score table
        of the year reads ten columns of 1.49M rows, and there are several tables)."""
        key = ("values", column, np.dtype(dtype).str)
        if key not in self._memo:
            array = self.rows[column].to_numpy(dtype)
            array.flags.writeable = False
            self._memo[key] = array
        return self._memo[key]

    def model_codes(self) -> np.ndarray:
        """Each row's model as its place in ``models`` (-1: a model not reported)."""
        if "models" not in self._memo:
            self._memo["models"] = positions(self.rows["model"], self.models)
        return self._memo["models"]

    def scored_rows(self) -> list[np.ndarray]:
        """Each model's scored rows, in ``models``' order, by position (no frame of them, no
        text compared per row)."""
        scored, code = self.rows["scored"].to_numpy(bool), self.model_codes()
        return [np.flatnonzero(scored & (code == j)) for j in range(len(self.models))]

    def scored_pairs(self, a: str, b: str, *, part: str = "scored"
                     ) -> tuple[np.ndarray, np.ndarray]:
        """Rows of model ``a`` and of model ``b`` forecasting the same task, both scored
        (``part="interval_scored"``: both gave an interval), in ``a``'s row order (an inner
        join on task_id); computed once per pair."""
        key = ("pairs", a, b, part)
        if key not in self._memo:
            if "tasks" not in self._memo:  # task ids as integers: joins without text
                self._memo["tasks"] = self._task_codes()
            scored, model, task = (self.rows[part].to_numpy(bool), self.model_codes(),
                                   self._memo["tasks"])
            ra = np.flatnonzero(scored & (model == self.models.index(a)))
            rb = np.flatnonzero(scored & (model == self.models.index(b)))
            self._memo[key] = _joined(task, ra, rb)
        return self._memo[key]

    def _task_codes(self) -> np.ndarray:
        """Each row's task as an integer, one per task id: within one run its row in the
        run's tasks (found when the rows were scored); across pooled runs, by its text."""
        at = self.rows["task_row"].to_numpy(np.int64) if "task_row" in self.rows else None
        if self.run_dir is not None and at is not None and (at >= 0).all():
            return at
        return pd.factorize(self.rows["task_id"])[0]


def _joined(task: np.ndarray, ra: np.ndarray, rb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``ra`` and ``rb`` of the same task (non-negative codes), as an inner join on the
    task keeping ``ra``'s order: where each side holds a task once (a model's rows), by an
    array over the tasks; else by pandas' merge."""
    ta, tb = task[ra], task[rb]
    size = int(max(ta.max(initial=-1), tb.max(initial=-1))) + 1
    if np.bincount(ta, minlength=size).max(initial=0) <= 1 and \
            np.bincount(tb, minlength=size).max(initial=0) <= 1:
        row_b = np.full(size, -1, np.int64)
        row_b[tb] = rb
        found = row_b[ta]
        has = found >= 0
        return ra[has].astype(np.int64), found[has]
    pair = pd.DataFrame({"task": ta, "_a": ra}).merge(pd.DataFrame({"task": tb, "_b": rb}),
                                                      on="task")
    return pair["_a"].to_numpy(np.int64), pair["_b"].to_numpy(np.int64)


def load_run(run_dir: str | Path) -> RunData:
    run_dir = finished_run(run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    config = RunConfig.model_validate(manifest["config"])
    tasks = pd.read_parquet(run_dir / "tasks.parquet")
    labels = pd.read_parquet(run_dir / "labels.parquet")
    # what the tables use: p_fallback is counted in scores.parquet only; an interval note is
    # one of a few texts, read as a category
    columns = [c for c in SCORED_COLUMNS if c != "p_fallback"]
    forecasts = pq.read_table(run_dir / "forecasts.parquet", columns=columns,
                              read_dictionary=["interval_note"]).to_pandas()
    rows = row_scores(forecasts, labels, tasks, invalid_policy=config.invalid_policy,
                      clip=config.scores.log_loss_clip, alpha=config.scores.alpha)
    # two columns of a few texts each, as categories (as text: 285 MB in a five-year run)
    rows["cutoff"] = cutoff_column(rows, knowledge_cutoffs(config))
    rationale = pq.read_table(run_dir / "forecasts.parquet", columns=["rationale"])
    judge = None
    if config.analysis.stance.method == "judge":  # the judge's reading where it gave one
        judged = judged_stances(run_dir)

        def judge(has: np.ndarray) -> list[str]:
            keys = zip(rows["model"].to_numpy(object)[has],
                       rows["task_id"].to_numpy(object)[has], strict=True)
            return [judged.get(key, "unjudged") for key in keys]
    rows["stance"] = stance_column(rationale.column("rationale"), judge)
    skipped = manifest.get("skipped_models", {})
    models = [n for n in binary_names(config) if n not in skipped]  # the binary question's
    baselines = [m.name for m in config.models if m.kind in BASELINE_KINDS and m.name in models]
    scores, scores3 = run_dir / "scores.parquet", run_dir / "scores3.parquet"
    ok = (labels["status"] == "ok").to_numpy(bool)
    counts = {"ok": int(ok.sum()),
              "positives": int((labels["y"].fillna(0).to_numpy() == 1)[ok].sum()),
              "ties": int((labels["r"].to_numpy(float) == 0)[ok].sum())}
    return RunData(run_dir.name, config, manifest, rows, models, baselines,
                   label_counts=counts,
                   scores=pd.read_parquet(scores) if scores.is_file() else None,
                   task_ids=tasks["task_id"],
                   scores3=pd.read_parquet(scores3) if scores3.is_file() else None,
                   run_dir=run_dir)


def stance_column(rationales, judged=None) -> pd.Categorical:
    """Per row, the stance of its rationale (:func:`~finbench.tracks.intraday.stance.stance`), or
    ``none`` without one; each distinct text read once. ``judged``: a judge's readings to
    use instead, ``judged(positions of the rows with a rationale) -> their stances``.
    Categories laid out by code: no text per row is made (7.5M rows in five years)."""
    text = rationales.to_numpy(zero_copy_only=False) if len(rationales) else np.empty(0, object)
    has = np.flatnonzero(pd.notna(text))
    distinct = list(dict.fromkeys(text[has]))
    found = [stance(t) for t in distinct]
    words = list(dict.fromkeys(["none", *found]))
    codes = np.zeros(len(text), np.int32)
    if len(has):
        code_of = {t: words.index(s) for t, s in zip(distinct, found, strict=True)}
        codes[has] = [code_of[t] for t in text[has]]
    if judged is not None and len(has):
        given = judged(has)
        words = list(dict.fromkeys([*words, *given]))
        codes[has] = [words.index(s) for s in given]
    return pd.Categorical.from_codes(codes, categories=words)


def cutoff_column(rows: pd.DataFrame, cutoffs: dict) -> pd.Categorical:
    """Per row, which side of its model's knowledge cutoff its session lies on
    (:func:`~finbench.core.config.cutoff_slice`); each distinct session's side found once
    and laid out by code."""
    codes = np.full(len(rows), 2, np.int8)  # CUTOFF_SLICES[2]: no cutoff declared
    if cutoffs:
        at, sessions = pd.factorize(rows["session"])
        sessions = np.asarray(sessions.astype(str), dtype=object)
        for name, cutoff in cutoffs.items():
            mine = (rows["model"] == name).to_numpy(bool)
            sides = np.array([CUTOFF_SLICES.index(s) for s in cutoff_slice(sessions, cutoff)],
                             np.int8)
            codes[mine] = sides[at[mine]]
    return pd.Categorical.from_codes(codes, categories=list(CUTOFF_SLICES))


def cluster_codes_of(rows: pd.DataFrame, cluster: str) -> np.ndarray:
    """Each row's bootstrap cluster (``"session"`` or ``"session_ticker"``) as an integer,
    numbered in the sorted order of its text (``session`` or ``session|ticker``), from the
    columns' own codes: no text per row is made (7.5M rows in five years). Sessions are
    ISO dates of one length, so (session, ticker) pairs sort as their joined texts do."""
    session = pd.factorize(rows["session"], sort=True)[0]
    if cluster == "session":
        return session
    ticker = pd.factorize(rows["ticker"], sort=True)[0]
    return pd.factorize(session.astype(np.int64) * (int(ticker.max(initial=0)) + 1) + ticker,
                        sort=True)[0]


def pooled(datas: list[RunData], labels: list[str]) -> RunData:
    """Several runs as one report: each model named after its run (``label/model``), its
    skill still relative to its own run's reference, on its own run's rows."""
    rows, models, baselines, scores, references = [], [], [], [], {}
    for d, label in zip(datas, labels, strict=True):
        prefix = f"{label}/"
        rows.append(d.rows.assign(model=prefix + d.rows["model"]))
        models += [prefix + m for m in d.models]
        baselines += [prefix + b for b in d.baselines]
        references.update({prefix + m: prefix + d.reference(m) for m in d.models
                           if d.reference(m) is not None})
        if d.scores is not None:
            scores.append(d.scores.assign(model=prefix + d.scores["model"]))
    caption = " ".join(f"Run {label}: {caption_facts(d)}"
                       for d, label in zip(datas, labels, strict=True))
    return RunData("+".join(labels), datas[0].config, datas[0].manifest,
                   pd.concat(rows, ignore_index=True), models, baselines,
                   scores=pd.concat(scores, ignore_index=True) if len(scores) == len(datas)
                   else None, references=references, caption=caption)


def task_overlap(datas: list[RunData], labels: list[str]) -> str | None:
    """None when every run has the same tasks; else how their task sets overlap."""
    sets = [set(d.task_ids) for d in datas]
    if all(s == sets[0] for s in sets[1:]):
        return None
    common = set.intersection(*sets)
    parts = [f"{label}: {len(s)} tasks, {len(s - common)} not in every run"
             for s, label in zip(sets, labels, strict=True)]
    return f"{len(common)} tasks common to all runs; " + "; ".join(parts)


def caption_facts(data: RunData) -> str:
    """N, positives, exclusions and the data source, for every caption: counts of the run's
    tasks and labels (a model asked some of the tasks, or several three-class models, counts
    nothing here)."""
    if data.caption is not None:
        return data.caption
    m = data.manifest
    labels = m["tasks"]["labels"]
    excluded = m["tasks"]["excluded"] or {}
    counts = data.label_counts  # counted over the run's tasks (never a model's rows)
    source = (m["data"]["description"] if m["data"]["synthetic"]
              else f"data store {Path(m['data']['store']).name}")
    sessions = m["tasks"].get("excluded_sessions") or {}
    excl = ", ".join(f"{k} {v} tasks of {sessions[k]} sessions" if k in sessions
                     else f"{k} {v} tasks" for k, v in sorted(excluded.items())) or "none"
    unsc = ", ".join(f"{k} {v}" for k, v in labels.items() if k != "ok" and v) or "none"
    return (f"{m['tasks']['tasks']} tasks, {counts['ok']} with labels "
            f"({counts['positives']} positive, {counts['ties']} ties); excluded: "
            f"{excl}; unscorable: {unsc}. Source: {source}.")


def score_table(data: RunData, *, slice_kind: str, composite: bool = True) -> pd.DataFrame:
    """Model × slice (overall, horizon or ticker; or any column of the rows, ``composite``
    false: a slice the scores table has not) with CIs for BS, BSS vs coin and Winkler.

    Slices come in the order they first appear in the rows (horizons in the config's order);
    each (slice, model) cell reads its rows by position, so a table of 500 tickers costs
    little beyond its bootstraps."""
    rep = data.config.report
    boot = {"replicates": rep.bootstrap_replicates, "seed": rep.seed, "level": rep.level,
            "draws": data.draws}
    rows, n_models = data.rows, len(data.models)
    if slice_kind == "overall":
        slice_code, values = np.zeros(len(rows), np.int64), ["all"]
    else:
        # the column itself, not .to_numpy(): no Python text per row (7.5M in five years)
        slice_code, values = pd.factorize(rows[slice_kind], sort=False)
        values = [str(v) for v in values]
    order = list(range(len(values)))
    if slice_kind == "horizon":
        rank = {h: i for i, h in enumerate(data.config.tasks.horizons)}
        order.sort(key=lambda i: rank.get(values[i], 99))
    model = data.model_codes()
    cell = np.where((slice_code >= 0) & (model >= 0), slice_code * n_models + model, -1)
    scored = data.values("scored", bool)
    every = groups(cell, len(values) * n_models)
    own_rows = groups(np.where(scored, cell, -1), len(values) * n_models)
    interval_rows = groups(np.where(data.values("interval_scored", bool), cell, -1),
                           len(values) * n_models)
    with_interval = interval_models(data)
    gives = ["given" if m in with_interval else NOT_APPLICABLE for m in data.models]
    cluster, session = data.cluster_codes(rep.cluster), data.cluster_codes("session")
    by_session = rep.cluster == "session"
    column = {c: data.values(c) for c in ("brier", "winkler", "y", "correct", "tie",
                                                    "log_loss", "covered", "width")}
    # flags as they are, not as floats of 8 bytes a row (a mean of 0/1 is the same number)
    column.update({c: data.values(c, bool) for c in ("valid", "answered")})
    paired = {}
    for m in data.models:
        if data.reference(m) is not None:
            own, ref = data.scored_pairs(m, data.reference(m))
            paired[m] = (own, ref, groups(slice_code[own], len(values)))
    # every cell's intervals at once (each as mean_ci / skill_ci of its rows alone would be)
    cells = [(i, j) for i in order for j in range(n_models)]
    brier_ci = cell_mean_cis(column["brier"], [own_rows[i * n_models + j] for i, j in cells],
                             cluster, **boot)
    winkler_ci = cell_mean_cis(column["winkler"],
                               [interval_rows[i * n_models + j] for i, j in cells], cluster,
                               **boot)
    skilled = [(i, j) for i, j in cells if data.models[j] in paired]
    skill_pairs = []
    for i, j in skilled:
        left, right, by_slice = paired[data.models[j]]
        skill_pairs.append((left[by_slice[i]], right[by_slice[i]]))
    skill = dict(zip(skilled, cell_skill_cis(column["brier"], column["brier"], skill_pairs,
                                             cluster, **boot), strict=True))
    pair_of = dict(zip(skilled, skill_pairs, strict=True))
    out = []
    for (i, j), bs, wk in zip(cells, brier_ci, winkler_ci, strict=True):
        name = data.models[j]
        own = own_rows[i * n_models + j]
        inside = interval_rows[i * n_models + j]
        asked = every[i * n_models + j]
        n = len(own)
        rec = {"slice": values[i], "model": name, "n": n,
               # (bootstrapping whole sessions, the interval counted them already)
               "sessions": bs.clusters if by_session else len(np.unique(session[own])),
               "positives": int(column["y"][own].sum()) if n else 0,
               "ties": int(column["tie"][own].sum()) if n else 0,
               "accuracy": _mean(column["correct"][own]),
               "brier": bs.estimate, "brier_lo": bs.lower, "brier_hi": bs.upper,
               "log_loss": _mean(column["log_loss"][own]),
               "n_interval": len(inside),
               "interval": gives[j],
               "coverage": _mean(column["covered"][inside]),
               "width": _mean(column["width"][inside]),
               "winkler": wk.estimate, "winkler_lo": wk.lower, "winkler_hi": wk.upper,
               "validity": _mean(column["valid"][asked][column["answered"][asked] > 0])}
        if (i, j) in skill:
            sk, (a, b) = skill[(i, j)], pair_of[(i, j)]
            ref = data.reference(name)
            rec.update(bss_ref=ref.rsplit("/", 1)[-1], bss_ref_model=ref, bss=sk.estimate,
                       bss_lo=sk.lower, bss_hi=sk.upper, bss_n=sk.n,
                       bss_model_brier=_mean(column["brier"][a]),
                       bss_ref_brier=_mean(column["brier"][b]))
        rec["flag"] = descriptive(n, rec["sessions"], min_n=rep.min_n,
                                  min_clusters=rep.min_sessions)
        out.append(rec)
    table = pd.DataFrame(out)
    if composite and data.config.scores.composite and len(table):
        table["composite_secondary"] = composites(data, table, slice_kind)
    return table


def composites(data: RunData, table: pd.DataFrame, slice_kind: str) -> np.ndarray:
    """The secondary composite of each (slice, model) row of ``table``, as the run's scores
    table has it: one number, computed once, in ``scores.csv`` and in every table."""
    if data.scores is None:
        raise RunError(f"{data.name}: scores.parquet is missing; `finbench score` the run first")
    scores = data.scores[data.scores["slice_kind"] == slice_kind]
    found = scores.set_index(["slice", "model"])["composite_secondary"]
    keys = pd.MultiIndex.from_arrays([table["slice"].astype(str), table["model"]])
    return found.reindex(keys).to_numpy(float)


def _mean(values: np.ndarray) -> float:
    """Mean of a column's values (NaN for none), summed as pandas sums them."""
    return float(values.mean()) if len(values) else np.nan


INTERVAL_LOSSES = ("winkler",)  # paired on the rows where both models gave an interval


def interval_models(data: RunData) -> list[str]:
    """The models that give intervals (not every valid row ``not_applicable``), in order."""
    na = data.rows["interval_note"].eq(NOT_APPLICABLE).to_numpy(bool)
    valid = data.rows["valid"].to_numpy(bool)
    model = data.model_codes()
    counts = np.bincount(model[(model >= 0) & valid], minlength=len(data.models))
    na_counts = np.bincount(model[(model >= 0) & valid & na], minlength=len(data.models))
    return [m for m, c, k in zip(data.models, counts, na_counts, strict=True)
            if not (c and k == c)]


def skill_cells(data: RunData) -> pd.DataFrame:
    """Brier skill of each model against its reference per ticker and horizon: ``1 -
    sum(brier) / sum(brier of the reference)`` over the tasks of the cell both scored, with
    that ``n`` and both mean scores; undefined (NaN) where the reference's sum is 0 or no
    task is paired. Models in the run's order (the reference itself left out), tickers
    sorted, horizons in the config's order."""
    rows = data.rows
    horizons = list(data.config.tasks.horizons)
    # a scored row's Brier by its task's place, per model (tasks are paired by place, not by
    # matching their id texts)
    scored = rows["scored"].to_numpy(bool)
    code = data.model_codes()  # each row's model by its place (no text compared per row)
    at = rows["task_row"].to_numpy(np.int64)
    brier = rows["brier"].to_numpy(float)
    tasks = int(at.max()) + 1 if len(at) else 0
    ticker, tickers = pd.factorize(rows["ticker"])
    horizon, horizon_names = pd.factorize(rows["horizon"])
    cell = ticker.astype(np.int64) * len(horizon_names) + horizon  # each ticker x horizon
    cells = len(tickers) * len(horizon_names)
    out = []
    for model in data.models:
        ref = data.reference(model)
        if ref is None or ref == model:
            continue
        theirs = scored & (code == data.models.index(ref)) if ref in data.models \
            else np.zeros(len(rows), bool)
        ref_brier = np.full(tasks, np.nan)
        ref_brier[at[theirs]] = brier[theirs]
        mine = np.flatnonzero(scored & (code == data.models.index(model)))
        paired = mine[np.isfinite(ref_brier[at[mine]])]
        n = np.bincount(cell[paired], minlength=cells)
        own = np.bincount(cell[paired], weights=brier[paired], minlength=cells)
        theirs_sum = np.bincount(cell[paired], weights=ref_brier[at[paired]], minlength=cells)
        has = np.flatnonzero(n)
        with np.errstate(divide="ignore", invalid="ignore"):
            bss = np.where(theirs_sum[has] != 0, 1.0 - own[has] / theirs_sum[has], np.nan)
        out.append(pd.DataFrame({
            "model": model, "reference": ref,
            "ticker": np.asarray(tickers, object)[has // len(horizon_names)].astype(str),
            "horizon": np.asarray(horizon_names, object)[has % len(horizon_names)].astype(str),
            "n": n[has], "brier": own[has] / n[has], "brier_ref": theirs_sum[has] / n[has],
            "bss": bss}))
    columns = ["model", "reference", "ticker", "horizon", "n", "brier", "brier_ref", "bss"]
    table = (pd.concat(out, ignore_index=True)[columns] if out
             else pd.DataFrame(columns=columns))
    if table.empty:
        return table
    order = {m: i for i, m in enumerate(data.models)}
    table["_m"] = table["model"].map(order)
    table["_h"] = table["horizon"].map({h: i for i, h in enumerate(horizons)})
    return table.sort_values(["_m", "ticker", "_h"], kind="stable").drop(
        columns=["_m", "_h"]).reset_index(drop=True)


def paired_table(data: RunData, *, metric: str = "brier") -> pd.DataFrame:
    """Every pair of models on their shared scored rows (for an interval loss: the rows where
    both gave an interval, among the models that give intervals): mean difference, CI,
    p-value."""
    rep = data.config.report
    values = data.values(metric)
    cluster, session = data.cluster_codes(rep.cluster), data.cluster_codes("session")
    interval = metric in INTERVAL_LOSSES
    models = interval_models(data) if interval else data.models
    out = []
    for a, b in combinations(models, 2):
        ra, rb = data.scored_pairs(a, b, part="interval_scored" if interval else "scored")
        ci, p = paired_difference(values[ra], values[rb], cluster[ra],
                                  replicates=rep.bootstrap_replicates, seed=rep.seed,
                                  level=rep.level, draws=data.draws)
        # (bootstrapping whole sessions, the interval counted them already)
        sessions = ci.clusters if rep.cluster == "session" else len(np.unique(session[ra]))
        out.append({"model_a": a, "model_b": b, "metric": metric, "n": ci.n,
                    "sessions": sessions,
                    "diff": ci.estimate, "diff_lo": ci.lower, "diff_hi": ci.upper, "p_value": p,
                    **power_and_dm(values[ra] - values[rb], cluster[ra], session[ra]),
                    "flag": descriptive(ci.n, sessions, min_n=rep.min_n,
                                        min_clusters=rep.min_sessions)})
    return adjusted(pd.DataFrame(out, columns=PAIRED_COLUMNS))


def power_and_dm(diff: np.ndarray, cluster: np.ndarray, session: np.ndarray) -> dict:
    """A paired comparison's minimum detectable difference at 80% power (from the variance
    clustered as its bootstrap resamples) and its Diebold-Mariano test on the sessions'
    mean differentials in date order (Newey-West variance; ``session``: codes in date
    order), :mod:`finbench.scoring.inference`."""
    stat, p, lags = diebold_mariano(series_of(diff, session))
    return {"mde": mde(diff, cluster), "dm_stat": stat, "dm_p": p, "dm_lags": lags}


def adjusted(table: pd.DataFrame) -> pd.DataFrame:
    """A comparison table with Holm-adjusted p-values over its rows (a family per table),
    of the bootstrap's p and the Diebold-Mariano test's."""
    return table.assign(p_holm=holm(table["p_value"].to_numpy(float)),
                        dm_p_holm=holm(table["dm_p"].to_numpy(float)))


INFERENCE_COLUMNS = ["mde", "dm_stat", "dm_p", "dm_lags"]
PAIRED_COLUMNS = ["model_a", "model_b", "metric", "n", "sessions", "diff", "diff_lo", "diff_hi",
                  "p_value", *INFERENCE_COLUMNS, "flag"]
TOOLS_COLUMNS = ["model", "without_tools", "reference", "n", "sessions", "brier", "brier_twin",
                 "diff", "diff_lo", "diff_hi", "p_value", "bss_diff", "bss_diff_lo",
                 "bss_diff_hi", *INFERENCE_COLUMNS, "flag"]


def tools_table(data: RunData, agents: list[str]) -> pd.DataFrame:
    """What tools add: each agent against its model without tools (the same provider's same
    model, :func:`~finbench.reports.agents.twin_of`), on the tasks both scored and its skill
    reference scored too: mean Brier of each, the agent's less the twin's with its CI and
    two-sided p, and the difference of their Brier skill against the reference with its CI
    (``sum(twin - agent) / sum(reference)``), resampling the report's clusters."""
    from finbench.reports.agents import twin_of

    rep = data.config.report
    values = data.rows["brier"].to_numpy(float)
    cluster, session = data.cluster_codes(rep.cluster), data.cluster_codes("session")
    out = []
    for agent in agents:
        twin, ref = twin_of(data.config, agent), data.reference(agent)
        if twin not in data.models or agent not in data.models or ref not in data.models:
            continue
        ra, rt = data.scored_pairs(agent, twin)
        # each agent row's reference row (the same task), where the reference scored it
        ref_of = dict(zip(*(x.tolist() for x in data.scored_pairs(agent, ref)), strict=True))
        keep = np.fromiter((i in ref_of for i in ra.tolist()), bool, len(ra))
        ra, rt = ra[keep], rt[keep]
        rr = np.array([ref_of[i] for i in ra.tolist()], np.int64)
        ci, p = paired_difference(values[ra], values[rt], cluster[ra],
                                  replicates=rep.bootstrap_replicates, seed=rep.seed,
                                  level=rep.level, draws=data.draws)
        skill = skill_ci(values[rr] - values[rt] + values[ra], values[rr], cluster[ra],
                         replicates=rep.bootstrap_replicates, seed=rep.seed, level=rep.level,
                         draws=data.draws)
        sessions = len(np.unique(session[ra]))
        out.append({"model": agent, "without_tools": twin, "reference": ref, "n": ci.n,
                    "sessions": ci.clusters if rep.cluster == "session" else sessions,
                    "brier": _mean(values[ra]), "brier_twin": _mean(values[rt]),
                    "diff": ci.estimate, "diff_lo": ci.lower, "diff_hi": ci.upper,
                    "p_value": p, "bss_diff": skill.estimate, "bss_diff_lo": skill.lower,
                    "bss_diff_hi": skill.upper,
                    **power_and_dm(values[ra] - values[rt], cluster[ra], session[ra]),
                    "flag": descriptive(ci.n, sessions, min_n=rep.min_n,
                                        min_clusters=rep.min_sessions)})
    return adjusted(pd.DataFrame(out, columns=TOOLS_COLUMNS))


MEMORY_COLUMNS = ["model", "versus", "against", "cutoff", "n_before", "sessions_before",
                  "before", "before_lo", "before_hi", "n_after", "sessions_after", "after",
                  "after_lo", "after_hi", "gap", "gap_lo", "gap_hi", "flag"]


def anonymized_twin(config, name: str) -> str | None:
    """The model of the run asking the same provider's same model the same question in the
    same prompt variant, anonymized where ``name`` is not (the first, in the config's
    order); None without one."""
    model = next(m for m in config.models if m.name == name)
    if getattr(model, "model", None) is None or getattr(model, "anonymize", True):
        return None
    keys = ("kind", "model", "base_url", "base_url_env", "format", "head", "labels", "prompt",
            "tools")
    for other in config.models:
        if (other.name != name and getattr(other, "anonymize", False)
                and all(getattr(other, k, None) == getattr(model, k, None) for k in keys)):
            return other.name
    return None


def memorisation_table(data: RunData) -> pd.DataFrame:
    """For each model declaring a ``knowledge_cutoff``: its Brier less its skill
    reference's on the tasks both scored, on the sessions up to its cutoff (possibly
    memorised) and after it, each with its CI, and the gap after less before with its CI
    (each side's sessions resampled within it, :func:`~finbench.scoring.bootstrap.gap_ci`);
    and the same against its anonymized twin (the same model asked without the ticker,
    names or dates): a difference below zero before the cutoff that vanishes after it (a
    positive gap) is what memorised outcomes look like."""
    from finbench.scoring.bootstrap import gap_ci
    from finbench.tracks.intraday.config import knowledge_cutoffs

    rep = data.config.report
    values = data.rows["brier"].to_numpy(float)
    cluster = data.cluster_codes(rep.cluster)
    sessions = data.rows["session"].astype(str).to_numpy(object)
    out = []
    for model, cutoff in knowledge_cutoffs(data.config).items():
        if model not in data.models:
            continue
        against = [("reference", data.reference(model)),
                   ("anonymized", anonymized_twin(data.config, model))]
        for versus, other in against:
            if other is None or other not in data.models:
                continue
            ra, rb = data.scored_pairs(model, other)
            d = values[ra] - values[rb]
            before = sessions[ra] <= cutoff.isoformat()
            a, b, gap = gap_ci(d[before], cluster[ra][before], d[~before], cluster[ra][~before],
                               replicates=rep.bootstrap_replicates, seed=rep.seed,
                               level=rep.level, draws=data.draws)
            fewest = min(a.clusters, b.clusters)
            out.append({"model": model, "versus": versus, "against": other,
                        "cutoff": cutoff.isoformat(), "n_before": a.n,
                        "sessions_before": a.clusters, "before": a.estimate,
                        "before_lo": a.lower, "before_hi": a.upper, "n_after": b.n,
                        "sessions_after": b.clusters, "after": b.estimate, "after_lo": b.lower,
                        "after_hi": b.upper, "gap": gap.estimate, "gap_lo": gap.lower,
                        "gap_hi": gap.upper,
                        "flag": descriptive(min(a.n, b.n), fewest, min_n=rep.min_n,
                                            min_clusters=rep.min_sessions)})
    return pd.DataFrame(out, columns=MEMORY_COLUMNS)


CORP_COLUMNS = ["model", "n", "sessions", "distinct", "brier", "mcb", "dsc", "unc", "bands",
                "flag"]


def corp_tables(data: RunData) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per model, on its scored rows: the CORP decomposition of its Brier score and whether
    its diagram has consistency bands; the diagram's points, long: model, each distinct
    forecast ``x``, its recalibrated probability ``cep``, row count and band),
    :mod:`finbench.scoring.corp`. The bands' draws are seeded by the report's seed."""
    from finbench.scoring.corp import BAND_LEVEL, reliability

    rep = data.config.report
    summary, points = [], []
    y_all, p_all = data.values("y"), data.values("p_up")
    session = data.cluster_codes("session")
    for model, own in zip(data.models, data.scored_rows(), strict=True):
        if not len(own):
            continue
        y, p = y_all[own], p_all[own]
        sessions = len(np.unique(session[own]))
        parts, drawn = reliability(p, y, seed=rep.seed)
        summary.append({"model": model, "n": parts["n"], "sessions": sessions,
                        "distinct": parts["distinct"], "brier": parts["brier"],
                        "mcb": parts["mcb"], "dsc": parts["dsc"], "unc": parts["unc"],
                        "bands": f"{BAND_LEVEL:.0%}" if drawn["lower"] is not None else "none",
                        "flag": descriptive(len(own), sessions, min_n=rep.min_n,
                                            min_clusters=rep.min_sessions)})
        k = len(drawn["x"])
        none = np.full(k, np.nan)
        points.append(pd.DataFrame({
            "model": model, "x": drawn["x"], "cep": drawn["cep"], "count": drawn["count"],
            "lower": none if drawn["lower"] is None else drawn["lower"],
            "upper": none if drawn["upper"] is None else drawn["upper"]}))
    return (pd.DataFrame(summary, columns=CORP_COLUMNS),
            pd.concat(points, ignore_index=True) if points else pd.DataFrame(
                columns=["model", "x", "cep", "count", "lower", "upper"]))


def calibration_tables(data: RunData) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary per model: N, sessions, Murphy terms and ECE for both binnings, and the
    descriptive flag; reliability bins, long)."""
    rep = data.config.report
    bins = rep.bins
    summary, reliab = [], []
    y_all, p_all = data.values("y"), data.values("p_up")
    session = data.cluster_codes("session")
    for model, own in zip(data.models, data.scored_rows(), strict=True):
        if not len(own):
            continue
        y, p = y_all[own], p_all[own]
        sessions = len(np.unique(session[own]))
        flag = descriptive(len(own), sessions, min_n=rep.min_n, min_clusters=rep.min_sessions)
        for strategy in ("uniform", "quantile"):
            mur, error, table = calibration(y, p, bins=bins, strategy=strategy)
            summary.append({"model": model, "binning": strategy, "n": mur["n"],
                            "sessions": sessions,
                            "brier": mur["brier"], "brier_binned": mur["brier_binned"],
                            "reliability": mur["reliability"], "resolution": mur["resolution"],
                            "uncertainty": mur["uncertainty"],
                            "ece": error, "flag": flag})
            reliab.append(table.assign(model=model, binning=strategy))
    return pd.DataFrame(summary), (pd.concat(reliab, ignore_index=True) if reliab
                                   else pd.DataFrame())


def decision(data: RunData) -> tuple[pd.DataFrame, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Kelly growth per model (session by session, see :mod:`finbench.tracks.intraday.decision`), with
    the descriptive flag, and the wealth paths (session dates, log wealth)."""
    rep = data.config.report
    table, paths = decision_table(data.rows, data.models)  # reads the columns it needs
    table["flag"] = descriptive(table["bets"].to_numpy(), table["sessions"].to_numpy(),
                                min_n=rep.min_n, min_clusters=rep.min_sessions)
    return table, paths
