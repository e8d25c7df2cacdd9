"""``finbench live`` (docs/live.md): a season of forecasts made in real time. At each horizon
of each session, by the exchange's calendar, the process waits for the horizon's time ``T``,
runs the config on that horizon's tasks alone with the store as it is then (the same gate,
forecasters and journal as a backtest: a run of its own under ``horizons/``), commits every
answer to the ledger and has its head time-stamped; after each session's target it reveals
the nonces; then it rebuilds ``run/``, the season's run of the sealed answers, which
``finbench score``, ``audit`` and ``report`` read as any run.

Restart-safe: what the ledger holds is never done again; a horizon whose answers were made
but not sealed is sealed (late, past its deadline); a horizon whose deadline passed while
the process was down is recorded as missed, never forecast late."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pandas as pd

from finbench.core.config import ConfigText
from finbench.core.errors import ConfigError, RunError, StoreError
from finbench.core.outputs import write_atomic
from finbench.live.clock import SystemClock
from finbench.live.final import build_final_run
from finbench.live.ledger import Ledger
from finbench.live.sealing import Nonces, commit_horizon, iso, payload, reveal, seal_horizon
from finbench.runner.run import run
from finbench.tracks import plugin_of
from finbench.tracks.configs import load_config_file, shard_config

ROOT_PEM = "tsa_root.pem"  # the TSA's root, kept with the ledger so anyone can verify
LIVE_FILE = "live.json"  # the season's settings as the live process ran them


def slots_of(config, plugin, first: dt.date, last: dt.date) -> list[dict]:
    """Every (session, horizon) in ``[first, last]`` in time order: its ``at`` (the
    forecast time) and ``target``, and its tasks' ids."""
    if last < first:
        return []
    tasks = plugin.open(shard_config(config, first, last)).tasks
    out = []
    for (session, horizon), part in tasks.groupby(["session", "horizon"], sort=False):
        out.append({"session": str(session), "horizon": str(horizon),
                    "at": pd.Timestamp(part["t_forecast"].iloc[0]).to_pydatetime(),
                    "target": pd.Timestamp(part["t_target"].max()).to_pydatetime(),
                    "task_ids": part["task_id"].tolist()})
    return sorted(out, key=lambda s: s["at"])


def live(config_path: str | Path, out: str | Path, *, clock=None, until: dt.date | None = None,
         horizon: str | None = None, echo=print) -> Path:
    """Run the live season of ``config_path`` into ``out`` up to ``until`` (default: today,
    by ``clock``), or (``horizon``) today's one horizon of that name; returns ``out``."""
    clock = clock or SystemClock()
    config, config_sha, _ = load_config_file(config_path)
    plugin = plugin_of(config)
    settings = plugin.live_settings(config)
    if settings is None:
        raise ConfigError(f"{config_path}: no [live] section: `finbench live` seals each "
                          "horizon's answers with an RFC 3161 authority (tsa_url, tsa_root)")
    if not plugin.shardable:
        raise ConfigError(f"{config_path}: the {config.track} track has no sessions to live by")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _keep_settings(out, config_path, config_sha, settings)
    zone = config.tasks.timezone
    today = pd.Timestamp(clock.now()).tz_convert(zone).date()
    last = min(config.tasks.end, until or today)
    season = slots = slots_of(config, plugin, config.tasks.start, last)
    if horizon is not None:
        slots = [s for s in slots if s["horizon"] == horizon and s["session"] == str(today)]
        if not slots:
            raise RunError(f"--horizon {horizon}: no such horizon today ({today}) in "
                           f"{config_path}")
    ledger, nonces = Ledger(out), Nonces(out)
    state = LedgerState(ledger)
    source = Source(config, settings, out, sorted({s["session"] for s in season}))
    for slot in slots:
        _reveal_due(out, ledger, state, nonces, clock, source, echo)
        _one_horizon(out, config_path, slot, settings, clock, ledger, state, nonces, source,
                     echo)
    if horizon is None and slots:  # a season (or a day) waits for its last target
        clock.sleep_until(max(s["target"] for s in slots)
                          + dt.timedelta(seconds=settings.reveal_after_seconds))
    _reveal_due(out, ledger, state, nonces, clock, source, echo)
    build_final_run(out, config_path, echo)
    return out


class Source:
    """Where a horizon's bars come from: the store, as a feed of the user's fills it (nothing
    to do), or a vendor asked for the day's bars that ended by a time, added to the store
    (:func:`~finbench.data.fetch.fetch_until`). Every earlier session of the season not yet
    brought whole (asked before its end, or while the process was down) is asked whole before
    a later one: a later task's baselines read its labels. The sessions brought whole are
    kept in ``fetched.json`` (a restart asks them no more)."""

    def __init__(self, config, settings, out: Path, sessions: list[str]) -> None:
        self.config, self.settings, self.path = config, settings, out / "fetched.json"
        self.whole = set(json.loads(self.path.read_text())) if self.path.is_file() else set()
        self.partial = set(sessions) - self.whole

    def bring(self, session: str, until: dt.datetime, echo) -> None:
        if self.settings.source == "store":
            return
        for earlier in sorted(d for d in self.partial if d < session):
            self._fetch(earlier, until, echo)
        self._fetch(session, until, echo)

    def _fetch(self, session: str, until: dt.datetime, echo) -> None:
        from finbench.data.fetch import EXTENDED_END, fetch_until
        from finbench.data.vendors.base import get_vendor

        vendor = get_vendor(self.settings.source, feed=self.settings.feed)
        rows = fetch_until(vendor, self.config.tasks.tickers, session, until,
                           self.config.data.store)
        end = (pd.Timestamp(session).tz_localize(self.config.tasks.timezone) + EXTENDED_END)
        if pd.Timestamp(until) >= end:
            self.partial.discard(session)
            self.whole.add(session)
            write_atomic(self.path, lambda p: Path(p).write_text(
                json.dumps(sorted(self.whole)) + "\n"))
        else:
            self.partial.add(session)
        when = pd.Timestamp(until).tz_convert("UTC").strftime("%Y-%m-%d %H:%M")
        echo(f"{session}: {rows} bars from {vendor.name} to {when} UTC")


def _keep_settings(out: Path, config_path, config_sha: str, settings) -> None:
    """The TSA's root and the season's settings beside the ledger (the same on every
    restart: another config or root is refused)."""
    root = Path(settings.tsa_root).read_bytes()
    facts = {"config_sha256": config_sha, "config_path": str(Path(config_path).resolve()),
             "tsa_url": settings.tsa_url, "seal_within_seconds": settings.seal_within_seconds,
             "reveal_after_seconds": settings.reveal_after_seconds}
    held = out / LIVE_FILE
    if held.is_file():
        old = json.loads(held.read_text())
        if old.get("config_sha256") != config_sha:
            raise RunError(f"{out}: holds a live season of another config "
                           f"({old.get('config_sha256', '?')[:12]}); use another --out")
        if (out / ROOT_PEM).read_bytes() != root:
            raise RunError(f"{out}: its seals chain to another TSA root than "
                           f"{settings.tsa_root}; use another --out")
        return
    (out / ROOT_PEM).write_bytes(root)
    held.write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")


class LedgerState:
    """What the ledger says is done (horizons sealed, missed, committed; the commitments not
    yet revealed), read once and then from what was appended since."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger, self.read = ledger, 0
        self.sealed: set = set()
        self.missed: set = set()
        self.committed: set = set()
        self.unrevealed: dict[tuple[str, str], dict] = {}

    def update(self) -> LedgerState:
        new = self.ledger.since(self.read)
        self.read += len(new)
        for e in new:
            if e["kind"] == "reveal":
                self.unrevealed.pop((e["task_id"], e["model"]), None)
                continue
            key = (e["session"], e["horizon"])
            {"seal": self.sealed, "missed": self.missed, "commit": self.committed}[
                e["kind"]].add(key)
            if e["kind"] == "commit":
                self.unrevealed[(e["task_id"], e["model"])] = e
        return self


def horizon_dir(out: Path, session: str, horizon: str) -> Path:
    return out / "horizons" / f"{session}_{horizon}"


def _one_horizon(out: Path, config_path, slot: dict, settings, clock, ledger: Ledger,
                 ledger_state: LedgerState, nonces: Nonces, source: Source, echo) -> None:
    state = ledger_state.update()
    key = (slot["session"], slot["horizon"])
    if key in state.sealed or key in state.missed:
        return  # done before (a restart)
    deadline = slot["at"] + dt.timedelta(seconds=settings.seal_within_seconds)
    folder = horizon_dir(out, *key)
    if key not in state.committed and clock.now() > deadline:
        ledger.append([{"kind": "missed", "session": key[0], "horizon": key[1],
                        "at": iso(slot["at"]), "noticed_at": iso(clock.now()),
                        "tasks": len(slot["task_ids"])}])
        echo(f"{key[0]} {key[1]}: missed (its time {slot['at']:%H:%M} UTC passed while the "
             "live process was not running): recorded, never forecast late")
        return
    if key not in state.committed:
        clock.sleep_until(slot["at"])
        source.bring(key[0], slot["at"], echo)
        echo(f"{key[0]} {key[1]}: forecasting {len(slot['task_ids'])} tasks")
        _horizon_run(config_path, folder, key, deadline, clock, echo)
        commit_horizon(ledger, nonces, slot, horizon_payloads(folder))
    answered = clock.now()
    entry = seal_horizon(ledger, slot, settings, clock, answered)
    echo(f"{key[0]} {key[1]}: sealed at {entry['tsa_time']} ("
         + ("on time" if entry["on_time"] else "LATE: never scored as on time") + ")")


def _horizon_run(config_path, folder: Path, key: tuple[str, str], deadline, clock,
                 echo) -> None:
    """The config run on one horizon's tasks into ``folder`` (made anew: a run left by a
    killed process is made again, its language models' answers from the cache). A feed that
    writes the store while the run reads it makes the run refuse the changed snapshot: it is
    made again a second later, to the deadline."""
    while True:
        shutil.rmtree(folder, ignore_errors=True)
        try:
            run(ConfigText.read(config_path), folder, shard=(key[0], key[0], (key[1],)),
                echo=lambda *_: None)
            return
        except StoreError as exc:
            if clock.now() >= deadline:
                raise
            echo(f"{key[0]} {key[1]}: the store changed while it was read ({exc}); reading "
                 "it again")
            clock.sleep_until(clock.now() + dt.timedelta(seconds=1))


def horizon_payloads(folder: Path) -> list[dict]:
    """The payloads of every answer of a horizon's run (its forecast table's rows, in order)."""
    rows = pd.read_parquet(folder / "forecasts.parquet")
    when = pd.read_parquet(folder / "tasks.parquet", columns=["task_id", "t_forecast"])
    at = dict(zip(when["task_id"], when["t_forecast"], strict=True))
    return [payload(r, at[r["task_id"]]) for r in rows.to_dict("records")]


def _reveal_due(out: Path, ledger: Ledger, ledger_state: LedgerState, nonces: Nonces, clock,
                source: Source, echo) -> None:
    """Reveal every committed answer whose horizon's target has passed (by the live
    settings' ``reveal_after_seconds``)."""
    due = list(ledger_state.update().unrevealed.values())
    if not due:
        return
    delay = dt.timedelta(seconds=json.loads((out / LIVE_FILE).read_text())[
        "reveal_after_seconds"])
    targets = _targets(out, {(c["session"], c["horizon"]) for c in due})
    ready = [c for c in due if clock.now() >= targets[(c["session"], c["horizon"])] + delay]
    if not ready:
        return
    for session in sorted({c["session"] for c in ready}):  # the day's bars past its targets
        source.bring(session, clock.now(), echo)
    payloads = {}
    for key in {(c["session"], c["horizon"]) for c in ready}:
        for p in horizon_payloads(horizon_dir(out, *key)):
            payloads[(p["task_id"], p["model"])] = p
    reveal(ledger, nonces, ready, payloads)
    echo(f"revealed {len(ready)} answers (their targets passed)")


def _targets(out: Path, keys) -> dict:
    out_ = {}
    for key in keys:
        tasks = pd.read_parquet(horizon_dir(out, *key) / "tasks.parquet", columns=["t_target"])
        out_[key] = pd.Timestamp(tasks["t_target"].max()).to_pydatetime()
    return out_
