"""The event track's references (docs/spec.md §11.5), each computable at its task's ``t0``:
a declared constant, a frequency frozen on a training window, the time-valid rate of the
task's category (markets resolved before ``t0``), and the market's own price at ``t0``.
Every row records what it read: ``history_count`` (markets counted), ``p_fallback`` (when a
declared fallback gave the probability), a ``detail`` with the counts, and the digest of its
input."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd

from finbench.core.errors import LookaheadError
from finbench.core.lookup import repeated
from finbench.core.times import NO_TIME, to_ns
from finbench.forecasters.answers import NOT_APPLICABLE
from finbench.forecasters.base import Forecaster, register
from finbench.tracks.base import Inputs


def _digest(lines) -> list[str]:
    return [hashlib.sha256(line.encode()).hexdigest() for line in lines]


def _answers(p: np.ndarray) -> pd.DataFrame:
    n = len(p)
    return pd.DataFrame({"p_up": p, "lower": np.full(n, np.nan), "upper": np.full(n, np.nan),
                         "interval_note": repeated(NOT_APPLICABLE, n)})


class _Reference(Forecaster):
    needs_context = False

    def _receipts(self, inputs: Inputs):
        return np.full(len(inputs.tasks), NO_TIME, np.int64), inputs.shared.pop(
            ("digests", self.name))


@register("constant")
class Constant(_Reference):
    """The declared probability for every market."""

    def _answer(self, inputs: Inputs):
        ids = inputs.tasks["task_id"]
        inputs.shared[("digests", self.name)] = _digest(
            f"{t}|constant {self.config.p!r}" for t in ids)
        return _answers(np.full(len(ids), self.config.p)), {}


@register("frozen_frequency")
class FrozenFrequency(_Reference):
    """The YES share of the markets (void left out) resolved in ``[train_from, train_to]``
    (UTC dates): one number, used only for tasks whose ``t0`` comes after the last of those
    resolutions (else :class:`LookaheadError`)."""

    def _answer(self, inputs: Inputs):
        train, last = frozen_window(self.config, inputs.history, inputs.tasks)
        p = float(train["y"].mean())
        n, yes = len(train), int(train["y"].sum())
        ids = ",".join(train["market_id"])
        inputs.shared[("digests", self.name)] = _digest(
            f"{t}|frozen {ids}" for t in inputs.tasks["task_id"])
        k = len(inputs.tasks)
        return _answers(np.full(k, p)), {
            "history_count": np.full(k, n, np.int64),
            "history_max_input_time": np.full(k, last.value, np.int64),
            "detail": json.dumps({"train": n, "yes": yes, "p": p})}


def frozen_window(config, history: pd.DataFrame, tasks: pd.DataFrame
                  ) -> tuple[pd.DataFrame, pd.Timestamp]:
    """The markets a frozen frequency (``config``) is fitted on, of ``history``, and the last
    of their resolutions; a LookaheadError when there are none, or when a task of ``tasks``
    has its ``t0`` at or before that resolution (its frequency was not known then). The
    event track checks its tasks with it before any retrieval, the reference when it
    answers."""
    day = history["resolved_at"].dt.date
    train = history[(day >= config.train_from) & (day <= config.train_to)]
    if config.categories is not None:
        train = train[train["category"].isin(config.categories)]
    if train.empty:
        raise LookaheadError(f"models.{config.name}: no market resolved YES or NO in "
                             f"{config.train_from}..{config.train_to}: nothing to freeze")
    last = train["resolved_at"].max()
    early = (tasks["t0"] <= last).to_numpy(bool)
    if early.any():
        task = tasks["task_id"].iat[int(np.argmax(early))]
        raise LookaheadError(f"models.{config.name}: task {task} is asked before the "
                             f"training window's last resolution ({last}); a frozen "
                             "frequency must be known at every t0 it answers "
                             f"({int(early.sum())} task(s) are)")
    return train, last


@register("category_rate")
class CategoryRate(_Reference):
    """The YES share of the task's category among markets resolved strictly before ``t0``
    (the last ``window``, or all); with fewer than ``min_count``, the share of all categories;
    with fewer again, ``prior``."""

    def _answer(self, inputs: Inputs):
        c, h, tasks = self.config, inputs.history, inputs.tasks
        t0 = to_ns(tasks["t0"])
        resolved = to_ns(h["resolved_at"])  # the history is sorted by resolved_at
        y, ids = h["y"].to_numpy(np.int64), h["market_id"].to_numpy(object)
        category = h["category"].to_numpy(object)
        n = len(tasks)
        p, count, last = np.full(n, c.prior), np.zeros(n, np.int64), np.full(n, NO_TIME)
        source = repeated("prior", n)
        used = [""] * n
        everything = np.arange(len(h))
        mine = {k: np.flatnonzero(category == k) for k in set(tasks["category"])}
        for i, kind in enumerate(tasks["category"]):
            # the category wins where it has enough markets, else all of them
            for scope, rows in (("category", mine[kind]), ("pooled", everything)):
                known = rows[:np.searchsorted(resolved[rows], t0[i], side="left")]  # < t0
                if c.window is not None:
                    known = known[-c.window:]
                if len(known) >= c.min_count:
                    p[i], count[i], last[i] = y[known].mean(), len(known), resolved[known[-1]]
                    used[i], source[i] = ",".join(ids[known]), scope
                    break
        fallback = np.full(n, None, dtype=object)
        fallback[source == "pooled"] = (f"all categories: fewer than {c.min_count} markets of "
                                        "the category resolved before t0")
        fallback[source == "prior"] = (f"prior {c.prior:g}: fewer than {c.min_count} markets "
                                       "resolved before t0")
        inputs.shared[("digests", self.name)] = _digest(
            f"{t}|{s}|{u}" for t, s, u in zip(tasks["task_id"], source, used, strict=True))
        detail = [json.dumps({"source": s, "count": int(k), "p": float(q)})
                  for s, k, q in zip(source, count, p, strict=True)]
        return _answers(p), {"history_count": count, "p_fallback": fallback,
                             "history_max_input_time": last, "detail": detail}


@register("market_price")
class MarketPrice(_Reference):
    """The market's YES price at ``t0`` (its last price at or before ``t0``): the crowd's
    forecast with the same information horizon."""

    needs_context = True

    def _receipts(self, inputs: Inputs):
        ctx = inputs.contexts
        return to_ns(ctx.price_time), _digest(
            f"{t}|price {m} {q!r} {w}" for t, m, q, w in zip(
                inputs.tasks["task_id"], inputs.tasks["market_id"], ctx.price,
                ctx.price_time.astype(str), strict=True))

    def _answer(self, inputs: Inputs):
        price = inputs.contexts.price
        answers = _answers(price)
        answers["refused"] = np.where(np.isnan(price), "no price at or before t0", None)
        return answers, {}
