"""The event track's tasks and labels (docs/spec.md §11.2-11.3): one task per market resolved
in the config's window, at its cutoff ``t0``; the label is the market's outcome, and a task
is scorable only when its market resolved YES or NO, ``opened_at <= t0 < resolved_at``, and
the market had a price at or before ``t0`` (not older than ``price_max_age_hours``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from finbench.core.errors import ConfigError, DataError
from finbench.core.lookup import repeated
from finbench.data.schema import cell
from finbench.data.user_files import read_table_file
from finbench.tracks.events.config import EventRunConfig
from finbench.tracks.events.markets import INSTANT_RULE, parse_instants
from finbench.tracks.events.store import EventStore

OK = "ok"
# why a task is not scored, in the order they are tested (the first that holds is recorded)
EXCLUSIONS = ("void", "t0_before_open", "t0_not_before_resolution", "no_price")


@dataclass
class EventPlan:
    config: EventRunConfig
    store: EventStore
    markets: pd.DataFrame  # every market of the store (the references' history)
    prices: pd.DataFrame  # every price of the store, by market then time
    tasks: pd.DataFrame  # the run's tasks in order: task_id, market_id, t0, ...


def task_ids(market_ids: pd.Series, t0: pd.Series) -> pd.Series:
    """``MARKET_ID|t0`` (t0 in UTC ISO form with ``Z``): the same in every run that asks
    that market at that instant."""
    stamps = t0.dt.tz_convert("UTC").dt.tz_localize(None)
    text = stamps.map(lambda t: t.isoformat()).astype(str)
    return market_ids.astype(str) + "|" + text + "Z"


def plan_events(config: EventRunConfig) -> EventPlan:
    """The run's tasks (no post read yet)."""
    store = EventStore(config.data.store)
    markets, prices = store.markets(), store.prices()
    spec = config.tasks
    day = markets["resolved_at"].dt.date
    chosen = markets[(day >= spec.resolved_from) & (day <= spec.resolved_to)]
    if spec.categories is not None:
        unknown = sorted(set(spec.categories) - set(markets["category"]))
        if unknown:
            raise ConfigError(f"tasks.categories: {', '.join(unknown)} is no category of "
                              f"{store.path} ({', '.join(sorted(set(markets['category'])))})")
        chosen = chosen[chosen["category"].isin(spec.categories)]
    chosen = chosen.assign(t0=cutoffs(config, chosen))
    tasks = chosen.assign(task_id=task_ids(chosen["market_id"], chosen["t0"]))
    tasks = tasks.sort_values(["t0", "market_id"], kind="stable").reset_index(drop=True)
    columns = ["task_id", "market_id", "t0", "category", "event_group", "opened_at",
               "closes_at", "resolved_at"]
    return EventPlan(config, store, markets, prices, tasks[columns])


def cutoffs(config: EventRunConfig, markets: pd.DataFrame) -> pd.Series:
    """Each market's ``t0`` by the config's rule."""
    spec = config.tasks
    if spec.cutoff == "open":
        return markets["opened_at"] + pd.Timedelta(hours=spec.open_delay_hours)
    if spec.cutoff == "lead":
        return markets["closes_at"] - pd.Timedelta(hours=spec.lead_hours)
    given = read_table_file(spec.cutoffs_file)
    missing = [c for c in ("market_id", "t0") if c not in given.columns]
    if missing:
        raise DataError(f"{spec.cutoffs_file}: missing column(s) {', '.join(missing)}")
    times, bad = parse_instants(given["t0"])
    problems = [f"{spec.cutoffs_file}: row {i + 2}: t0 {cell(given['t0'].iat[i])}: "
                f"{INSTANT_RULE}" for i in np.flatnonzero(bad)]
    ids = given["market_id"].astype(str)
    problems += [f"{spec.cutoffs_file}: row {i + 2}: market_id {ids.iat[i]!r} appears twice"
                 for i in np.flatnonzero(ids.duplicated().to_numpy(bool))]
    lookup = pd.Series(times.to_numpy(), index=ids)
    lookup = lookup[~lookup.index.duplicated()]
    absent = sorted(set(markets["market_id"]) - set(lookup.index))
    problems += [f"{spec.cutoffs_file}: no t0 for market {m} (every market of the run needs "
                 "one)" for m in absent[:20]]
    if problems:
        raise DataError(f"{spec.cutoffs_file}: {len(problems)} problem(s)", problems)
    return pd.Series(lookup.loc[markets["market_id"]].to_numpy(), index=markets.index,
                     dtype="datetime64[ns, UTC]")


def price_at(prices: pd.DataFrame, market_ids: pd.Series, t0: pd.Series,
             max_age: pd.Timedelta) -> tuple[np.ndarray, np.ndarray]:
    """Per task, the market's last YES price at or before ``t0`` and its time (NaN and NaT
    when there is none within ``max_age``). Only prices at or before ``t0`` are looked at."""
    key = prices["market_id"].to_numpy(object)
    when = prices["time"].dt.tz_convert("UTC").to_numpy("datetime64[ns]").astype(np.int64)
    stamp = t0.dt.tz_convert("UTC").to_numpy("datetime64[ns]").astype(np.int64)
    first = pd.Series(np.arange(len(key))).groupby(key, sort=False).min()
    last = pd.Series(np.arange(len(key))).groupby(key, sort=False).max()
    price = np.full(len(stamp), np.nan)
    at = np.full(len(stamp), np.iinfo(np.int64).min)
    for i, (market, t) in enumerate(zip(market_ids.to_numpy(object), stamp, strict=True)):
        if market not in first.index:
            continue
        lo, hi = int(first[market]), int(last[market]) + 1
        j = lo + int(np.searchsorted(when[lo:hi], t, side="right")) - 1
        if j >= lo and t - when[j] <= max_age.value:
            price[i], at[i] = prices["price"].iat[j], when[j]
    return price, at


def label_events(plan: EventPlan) -> pd.DataFrame:
    """Every task's label: ``outcome``, ``y`` (1 YES, 0 NO, -1 not scored), ``status`` (ok or
    the first exclusion that holds), and the market's price at ``t0`` with its time."""
    tasks = plan.tasks
    outcome = plan.markets.set_index("market_id").loc[tasks["market_id"], "outcome"].to_numpy()
    price, at = price_at(plan.prices, tasks["market_id"], tasks["t0"],
                         pd.Timedelta(hours=plan.config.tasks.price_max_age_hours))
    tests = {"void": outcome == "void",
             "t0_before_open": (tasks["t0"] < tasks["opened_at"]).to_numpy(bool),
             "t0_not_before_resolution": (tasks["t0"] >= tasks["resolved_at"]).to_numpy(bool),
             "no_price": np.isnan(price)}
    status = repeated(OK, len(tasks))
    for reason in reversed(EXCLUSIONS):  # the first that holds wins
        status[tests[reason]] = reason
    y = np.where(outcome == "YES", 1, 0).astype(np.int8)
    y[status != OK] = -1
    return pd.DataFrame({
        "task_id": tasks["task_id"], "market_id": tasks["market_id"], "t0": tasks["t0"],
        "outcome": outcome, "y": y, "status": status, "category": tasks["category"],
        "event_group": tasks["event_group"], "resolved_at": tasks["resolved_at"],
        "price_time": pd.to_datetime(np.where(at == np.iinfo(np.int64).min, np.datetime64("NaT"),
                                              at.astype("datetime64[ns]")), utc=True),
        "price": price})
