"""Per-model aggregates from stored forecasts and labels only (docs/spec.md §8).

Rows: one per model and slice (``overall``, ``horizon=…``, ``ticker=…``). A forecast is scored
when it is valid (or replaced under ``invalid_policy = "fallback:<baseline>"``) and its label is
``ok``; its two parts apart: the probability (Brier, log loss, accuracy, Kelly growth of
each bet alone, ``kelly``, and of each session's bets together, ``kelly_session``) on every
such row, the interval (Winkler, coverage, width) on those that give one. A forecaster that
gives no interval (``interval_note = "not_applicable"``) has no interval scores at all, never
another forecaster's; an abstention (``insufficient_history``) is counted, not scored. Skill
against a baseline uses the *paired* rows both scored (for intervals: both gave one), with
the paired N and both paired mean scores beside it; a zero reference loss gives an undefined
(null) skill.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from finbench.core.lookup import (
    arrow_text,
    copies_of,
    laid_positions,
    positions,
    repeated_column,
    take,
)
from finbench.runlog.rows import ERROR
from finbench.scoring import kernels

SLICE_KINDS = ("overall", "horizon", "ticker")
SCORED_COLUMNS = ("task_id", "model", "p_up", "lower", "upper", "valid", "answer_status",
                  "p_fallback", "interval_note")  # what rows read
NOT_APPLICABLE = "not_applicable"  # interval_note of a forecaster that gives no interval


def row_scores(forecasts: pd.DataFrame, labels: pd.DataFrame, tasks: pd.DataFrame, *,
               invalid_policy: str = "exclude", clip: float = 1e-6, alpha: float = 0.2,
               reference: pd.DataFrame | None = None) -> pd.DataFrame:
    """Forecast rows joined with labels, the policy applied, and per-row scores.
    ``reference``: the rows holding the fallback baseline's forecasts, when ``forecasts``
    (e.g. one model's rows) does not."""
    frame = forecasts.reset_index(drop=True).copy()
    ids = arrow_text(frame["task_id"])
    task_ids = arrow_text(tasks["task_id"])
    # a run writes each model's rows in task order, model after model: then a comparison
    # per model replaces the look-up, and the tasks' columns are laid end to end
    copies = copies_of(ids, task_ids)
    at_task = laid_positions(ids, task_ids, copies)
    label_ids = arrow_text(labels["task_id"])  # a run's labels lie in task order: one look-up
    in_order = label_ids.equals(task_ids)
    at_label = at_task if in_order else positions(ids, label_ids)
    for source, at, cols, laid in ((labels, at_label, ("r", "y", "status"), in_order),
                                   (tasks, at_task, ("ticker", "session", "horizon"), True)):
        for col in cols:
            frame[col] = repeated_column(source[col], copies) if copies and laid \
                else take(source[col], at)
    frame["task_row"] = at_task  # the task's row in ``tasks`` (-1: not a task of the run)
    frame["fallback_used"] = False
    # a call that got no answer is no answer: neither valid nor invalid, never replaced
    frame["answered"] = (frame["answer_status"] != ERROR).to_numpy(bool) \
        if "answer_status" in frame else True
    if invalid_policy.startswith("fallback:"):
        base = invalid_policy.split(":", 1)[1]
        source = forecasts if reference is None else reference
        ref = source[(source["model"] == base) & source["valid"]].set_index("task_id")
        swap = (~frame["valid"] & frame["answered"] & frame["task_id"].isin(ref.index)
                & (frame["model"] != base))
        for col in ("p_up", "lower", "upper"):
            frame.loc[swap, col] = ref.loc[frame.loc[swap, "task_id"], col].to_numpy()
        frame["fallback_used"] = swap
    usable = (frame["valid"] | frame["fallback_used"]).to_numpy(bool)
    p, lo, hi = (frame[c].to_numpy(float) for c in ("p_up", "lower", "upper"))
    ok = (frame["status"] == "ok").to_numpy(bool)
    frame["scored"] = usable & ok & np.isfinite(p)
    frame["interval_scored"] = usable & ok & np.isfinite(lo) & np.isfinite(hi)
    s, si = frame["scored"].to_numpy(), frame["interval_scored"].to_numpy()
    y = frame["y"].astype("float64").to_numpy()
    r = frame["r"].to_numpy(float)
    nan = np.full(len(frame), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        frame["brier"] = np.where(s, kernels.brier(y, p), nan)
        frame["log_loss"] = np.where(s, kernels.log_loss(y, p, clip), nan)
        frame["winkler"] = np.where(si, kernels.winkler(r, lo, hi, alpha), nan)
        frame["covered"] = np.where(si, kernels.covered(r, lo, hi), nan)
        frame["width"] = np.where(si, kernels.width(lo, hi), nan)
        frame["correct"] = np.where(s, kernels.correct(y, p), nan)
        frame["kelly"] = np.where(s, kernels.kelly(y, p), nan)
        frame["tie"] = np.where(s, r == 0, nan)
    return frame


PROBABILITY_METRICS = (("correct", "accuracy"), ("brier", "brier"), ("log_loss", "log_loss"),
                       ("kelly", "kelly"))  # means over the rows whose probability is scored
INTERVAL_METRICS = (("covered", "coverage"), ("width", "width"), ("winkler", "winkler"))
METRICS = PROBABILITY_METRICS + INTERVAL_METRICS


def aggregate(rows: pd.DataFrame, *, models: list[str], baselines: list[str],
              interval_reference: str | None, composite: dict[str, float] | None = None,
              horizon_order: list[str] | None = None) -> pd.DataFrame:
    """One row per (model, slice) with counts, mean scores and paired skill, from the scored
    rows of every model (:func:`row_scores`). See :class:`Tally`."""
    model_at = positions(rows["model"], list(models))
    rows = rows[model_at >= 0]
    if "task_row" in rows and (rows["task_row"].to_numpy() >= 0).all():
        # tasks numbered in the run's task order, whatever order the rows come in
        _, first, task_codes = np.unique(rows["task_row"].to_numpy(), return_index=True,
                                         return_inverse=True)
    else:
        encoded = arrow_text(rows["task_id"]).dictionary_encode()
        task_codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        _, first = np.unique(task_codes, return_index=True)  # first row of each task
    rows = rows.assign(task_code=task_codes)
    tally = Tally(rows.iloc[first].reset_index(drop=True), models=models, baselines=baselines,
                  interval_reference=interval_reference)
    for model in models:
        tally.add(model, rows[(rows["model"] == model).to_numpy(bool)])
    return tally.table(composite=composite, horizon_order=horizon_order)


class Tally:
    """Counts, mean scores and paired skill per (model, slice), one model at a time.

    ``per_task`` has one row per task (``ticker``, ``horizon``), in the numbering the rows'
    ``task_code`` uses. :meth:`add` takes one model's scored rows and lays them out as arrays
    over tasks; every count and sum is a ``bincount`` of them over cells (a ticker at a
    horizon), and each slice's (overall, a horizon, a ticker) the sum of its cells'. Only
    what paired skill needs (scored, Brier and Winkler per task: 17 bytes a task) is kept per
    model until :meth:`table`, so memory holds one model's rows at a time.
    """

    def __init__(self, per_task: pd.DataFrame, *, models: list[str], baselines: list[str],
                 interval_reference: str | None) -> None:
        self.n_tasks, self.models = len(per_task), list(models)
        # every slice is a union of cells (a ticker at a horizon): sums are taken per cell,
        # once, and each slice's sums from its cells'
        coded = {kind: pd.factorize(per_task[kind].astype(str)) for kind in ("horizon", "ticker")}
        (horizon, _), (ticker, tickers) = coded["horizon"], coded["ticker"]
        joint = horizon.astype(np.int64) * max(len(tickers), 1) + ticker
        _, first, cells = np.unique(joint, return_index=True, return_inverse=True)
        self.cells, self.n_cells = cells.ravel(), len(first)
        # each task's session (for the Kelly growth of a session's bets sized together)
        self.sessions, names = pd.factorize(per_task["session"].astype(str), sort=True)
        self.n_sessions = max(len(names), 1)
        self._session_keys: dict[str, np.ndarray] = {}  # per slice kind
        self.slices = []
        for kind in SLICE_KINDS:
            if kind == "overall":
                to = np.zeros(len(first), dtype=np.int64)
                values = np.array(["all"], dtype=object)
            else:
                codes, values = coded[kind]
                to = codes[first].astype(np.int64)
                values = np.asarray(values, dtype=object)
            self.slices.append((kind, to, values))
        # (column, loss, which rows a model scored on it, reference model)
        self.references = [(f"bss_{b}", "brier", "scored", b) for b in baselines]
        if interval_reference:
            self.references.append((f"wss_{interval_reference}", "winkler", "interval_scored",
                                    interval_reference))
        self.parts: dict[str, list] = {}
        self.kept: dict[str, dict[str, np.ndarray]] = {}

    def add(self, model: str, rows: pd.DataFrame) -> None:
        """Take the scored rows of ``model`` (each with its ``task_code``)."""
        at = rows["task_code"].to_numpy(np.int64)
        every = len(at) == self.n_tasks and bool((at == np.arange(len(at))).all())

        def lay(values, fill=np.nan) -> np.ndarray:
            if every:  # one row per task, in task order (the usual case): nothing to lay out
                return np.broadcast_to(np.asarray(values, dtype=float), (self.n_tasks,))
            out = np.full(self.n_tasks, fill, dtype=float)
            out[at] = values
            return out

        has = lay(1.0, 0.0) > 0
        sc = lay(rows["scored"].to_numpy(float), 0.0) > 0
        si = lay(rows["interval_scored"].to_numpy(float), 0.0) > 0
        status = rows["status"]
        valid = rows["valid"].to_numpy(bool)
        none = np.zeros(len(rows), bool)
        note = arrow_text(rows["interval_note"]) if "interval_note" in rows else None
        given = pc.is_valid(note).to_numpy(zero_copy_only=False) if note is not None else none
        na = (pc.fill_null(pc.equal(note, NOT_APPLICABLE), False).to_numpy(zero_copy_only=False)
              if note is not None else none)
        fallback = (pc.is_valid(arrow_text(rows["p_fallback"])).to_numpy(zero_copy_only=False)
                    if "p_fallback" in rows else none)
        flags = {
            "n_valid": valid.astype(float),
            "n_error": (~rows["answered"].to_numpy(bool)).astype(float),
            "n_fallback": rows["fallback_used"].to_numpy(float),
            "n_p_fallback": (valid & fallback).astype(float),
            "n_interval_abstained": (valid & given & ~na).astype(float),
            "n_interval_not_applicable": (valid & na).astype(float),
            "n_unscorable": (status != "ok").to_numpy(float),
            "n_no_reference_price": (status == "no_reference_price").to_numpy(float),
            "n_no_target_price": (status == "no_target_price").to_numpy(float),
            "n_no_bars": (status == "no_bars").to_numpy(float),
        }
        counted = {name: lay(v, 0.0) if every else np.where(has, lay(v, 0.0), 0.0)
                   for name, v in flags.items()}
        metric = {col: lay(rows[col].to_numpy(float)) for col, _ in METRICS}
        with np.errstate(invalid="ignore"):  # each scored bet's gain (2p - 1)(2y - 1)
            gain = (2 * rows["p_up"].to_numpy(float) - 1) * (
                2 * rows["y"].astype("float64").to_numpy() - 1)
        bets = lay(np.where(rows["scored"].to_numpy(bool), gain, 0.0), 0.0)
        for col in ("y", "tie"):
            metric[col] = lay(rows[col].astype("float64").to_numpy())
        interval_cols = {col for col, _ in INTERVAL_METRICS}
        summed = {col: np.where(si if col in interval_cols else sc, values, 0.0)
                  for col, values in metric.items()}
        self.kept[model] = {"scored": sc, "interval_scored": si, "brier": metric["brier"],
                            "winkler": metric["winkler"]}
        parts = self.parts[model] = []
        n_rows_cell = np.bincount(self.cells[has], minlength=self.n_cells)
        cell = {"n": self._cells(sc.astype(float)), "n_interval": self._cells(si.astype(float)),
                **{name: self._cells(w) for name, w in counted.items()},
                **{col: self._cells(w) for col, w in summed.items()}}
        for kind, to, values in self.slices:
            k = len(values)

            def total(name, to=to, k=k) -> np.ndarray:
                return _sums(to, cell[name], k)

            n_rows = np.bincount(to, weights=n_rows_cell, minlength=k).astype(np.int64)
            n, n_interval = total("n"), total("n_interval")
            cols = {"model": np.full(k, model, dtype=object),
                    "slice_kind": np.full(k, kind, dtype=object),
                    "slice": values.astype(str).astype(object), "n_tasks": n_rows}
            counts = {name: total(name) for name in counted}
            cols["n_valid"] = counts["n_valid"].astype(np.int64)
            cols["n_error"] = counts["n_error"].astype(np.int64)
            with np.errstate(invalid="ignore", divide="ignore"):
                cols["validity"] = counts["n_valid"] / (n_rows - counts["n_error"])
                for name in ("n_fallback", "n_p_fallback", "n_interval_abstained",
                             "n_interval_not_applicable", "n_unscorable",
                             "n_no_reference_price", "n_no_target_price", "n_no_bars"):
                    cols[name] = counts[name].astype(np.int64)
                cols["n"] = n.astype(np.int64)
                cols["n_interval"] = n_interval.astype(np.int64)
                cols["positives"] = total("y").astype(np.int64)
                cols["ties"] = total("tie").astype(np.int64)
                for col, name in PROBABILITY_METRICS:
                    cols[name] = np.where(n > 0, total(col) / n, np.nan)
                cols["kelly_session"] = self._session_growth(kind, to, k, has, bets)
                for col, name in INTERVAL_METRICS:
                    cols[name] = np.where(n_interval > 0, total(col) / n_interval, np.nan)
            parts.append((to, k, n_rows > 0, cols))

    def _session_growth(self, kind: str, to: np.ndarray, k: int, asked: np.ndarray,
                        bets: np.ndarray) -> np.ndarray:
        """Per slice (``to``: each cell's), the decision layer's Kelly growth of its bets
        (:mod:`finbench.tracks.intraday.decision`): the mean over the slice's sessions of
        ``ln(1 + (1/K) sum (2p - 1)(2y - 1))``, K the slice's tasks of the model in that
        session (an unscored one stakes nothing); -inf when a session lost every stake; NaN
        without a session."""
        if kind not in self._session_keys:  # each slice kind's, made once for every model
            self._session_keys[kind] = to[self.cells] * self.n_sessions + self.sessions
        key, size = self._session_keys[kind], k * self.n_sessions
        count = np.bincount(key, weights=asked.astype(float), minlength=size)
        gained = np.bincount(key, weights=bets, minlength=size)
        with np.errstate(invalid="ignore", divide="ignore"):
            growth = np.log(np.maximum(1.0 + gained / count, 0.0))
        held = (count > 0).reshape(k, self.n_sessions)
        total = np.where(held, growth.reshape(k, self.n_sessions), 0.0).sum(axis=1)
        days = held.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(days > 0, total / days, np.nan)

    def _cells(self, weights: np.ndarray) -> np.ndarray:
        """Sum of ``weights`` (one per task) per cell."""
        return _sums(self.cells, weights, self.n_cells)

    def table(self, *, composite: dict[str, float] | None = None,
              horizon_order: list[str] | None = None) -> pd.DataFrame:
        """The scores table: paired skill added, rows in the report's order."""
        frames = []
        for model in self.models:
            own = self.kept.get(model)
            paired = {}  # per reference: the paired count and both losses' sums per cell
            for key, loss, mask, ref in self.references if own is not None else ():
                other = self.kept.get(ref, {mask: np.zeros(self.n_tasks, bool),
                                            loss: np.full(self.n_tasks, np.nan)})
                both = own[mask] & other[mask]
                paired[key] = [self._cells(both.astype(float)),
                               self._cells(np.where(both, own[loss], 0.0)),
                               self._cells(np.where(both, other[loss], 0.0))]
            for to, k, keep, cols in self.parts.get(model, []):
                for key, sums in paired.items():
                    with np.errstate(invalid="ignore", divide="ignore"):
                        cols.update(_paired(*(_sums(to, v, k) for v in sums), key))
                frames.append(pd.DataFrame({c: v[keep] for c, v in cols.items()}))
        table = pd.concat(frames, ignore_index=True)
        if composite:
            table["composite_secondary"] = sum(w * table[col] for col, w in composite.items())
        order = {m: i for i, m in enumerate(self.models)}
        kinds = {k: i for i, k in enumerate(SLICE_KINDS)}
        hz = {h: i for i, h in enumerate(horizon_order or [])}
        table["_k"] = table["slice_kind"].map(kinds)
        table["_m"] = table["model"].map(order)
        table["_s"] = [hz.get(v, len(hz)) if k == "horizon" else 0
                       for k, v in zip(table["slice_kind"], table["slice"], strict=True)]
        table = table.sort_values(["_k", "_s", "slice", "_m"], kind="stable")
        return table.drop(columns=["_k", "_m", "_s"]).reset_index(drop=True)


def _sums(codes: np.ndarray, weights: np.ndarray, k: int) -> np.ndarray:
    """Sum of ``weights`` per code (a ``bincount``); zeros, without one, when every weight is
    zero (the counts and interval sums a forecaster never has)."""
    if not weights.any():
        return np.zeros(k)
    return np.bincount(codes, weights=weights, minlength=k)


def _paired(n, own_sum, ref_sum, key) -> dict:
    """Skill against a reference on the tasks both scored, per slice, from the sums."""
    own = np.where(n > 0, own_sum / np.maximum(n, 1), np.nan)
    ref = np.where(n > 0, ref_sum / np.maximum(n, 1), np.nan)
    skill = np.where((n > 0) & (ref_sum != 0), 1.0 - own_sum / np.where(ref_sum == 0, 1, ref_sum),
                     np.nan)
    return {key: skill, f"{key}_n": n.astype(np.int64), f"{key}_model": own, f"{key}_ref": ref}
