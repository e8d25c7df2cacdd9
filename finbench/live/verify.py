"""``finbench verify DIR`` (docs/live.md): what a stranger checks of a published live
directory, with nothing but it and the store:

1. the ledger's chain, line by line (the first break named);
2. every seal: its head is the hash of the entry before it (and its time before the target
   of every task it seals), its token a valid RFC 3161
   time-stamp of that head by a TSA certified under ``tsa_root.pem``, its time the one it
   records, its deadline the horizon's time plus the season's allowance, and on time exactly
   when the token's time is at or before it; the commitments it seals are those between the
   previous seal and it, of its horizon;
3. every commitment revealed once, after its seal, its ``SHA-256(payload || nonce)`` the one
   committed, its payload's task and model the commitment's, its receipt's input times not
   after its forecast time;
4. the season's run (``run/``): every on-time revealed answer replayed as it was sealed and
   no other, each baseline's row the answer it sealed, and its score tables those of the
   season's run made again from ``run.toml`` and the store (``finbench audit DIR/run``
   derives every label, answer and score again where the run was made)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from finbench.live.ledger import GENESIS, LEDGER, Ledger, chain_problems, commitment
from finbench.live.tsa import check_token, decode
from finbench.runlog.rundir import finished_run

SHOWN = 10


def verify_live(folder: str | Path, *, audit: bool = True) -> tuple[list[str], dict]:
    """(problems, facts) of a live directory; no problem: it verifies."""
    folder = Path(folder)
    if not (folder / LEDGER).is_file():
        return [f"{folder}: no {LEDGER}: not a live directory"], {}
    problems = chain_problems(folder / LEDGER)
    if problems:
        return problems, {}
    entries = Ledger(folder).entries()
    settings = json.loads((folder / "live.json").read_text())
    root = (folder / "tsa_root.pem").read_bytes()
    facts = {"commits": 0, "seals": 0, "on_time": 0, "late": 0, "missed": 0, "revealed": 0}
    problems += _seal_problems(entries, root, settings, facts)
    problems += _reveal_problems(entries, facts)
    if audit and not problems and (folder / "run" / "manifest.json").is_file():
        problems += _run_problems(folder, entries)
    return problems, facts


def _seal_problems(entries: list[dict], root: bytes, settings: dict, facts: dict) -> list[str]:
    problems = []
    pending: list[dict] = []  # commitments since the last seal
    within = pd.Timedelta(seconds=settings["seal_within_seconds"])
    for i, e in enumerate(entries):
        if e["kind"] == "commit":
            facts["commits"] += 1
            pending.append(e)
        elif e["kind"] == "missed":
            facts["missed"] += 1
        elif e["kind"] == "seal":
            facts["seals"] += 1
            found, on_time = _one_seal(e, entries[i - 1]["hash"] if i else GENESIS, pending,
                                       root, within)
            problems += [f"{LEDGER}: line {i + 1}: {p}" for p in found]
            facts["on_time" if on_time else "late"] += len(pending)
            pending = []
    if pending:
        problems.append(f"{LEDGER}: line {pending[0]['seq'] + 1}: a commitment no seal covers")
    return problems


def _one_seal(e: dict, head: str, pending: list[dict], root: bytes, within
              ) -> tuple[list[str], bool]:
    """(a seal's problems, whether its token shows it on time)."""
    problems = []
    if e["head"] != head:
        problems.append("the seal's head is not the hash of the line before")
    stray = [c for c in pending if (c["session"], c["horizon"]) != (e["session"], e["horizon"])]
    if stray:
        problems.append(f"seals a commitment of another horizon (line {stray[0]['seq'] + 1})")
    deadline = pd.Timestamp(e["at"]) + within
    if pd.Timestamp(e["deadline"]) != deadline:
        problems.append(f"deadline {e['deadline']} is not its horizon's time plus "
                        f"{within.total_seconds():g} s")
    on_time = False
    if e["token"] is not None:
        when, why = check_token(decode(e["token"]), e["head"].encode(), root)
        if when is None:
            problems.append(f"its time-stamp token {why}")
        else:
            if pd.Timestamp(when) != pd.Timestamp(e["tsa_time"]):
                problems.append(f"tsa_time {e['tsa_time']} is not its token's time "
                                f"{when.isoformat()}")
            on_time = pd.Timestamp(when) <= deadline
    if bool(e["on_time"]) != on_time:
        problems.append(f"says on_time {e['on_time']}, its token says {on_time}")
    return problems, on_time


def _reveal_problems(entries: list[dict], facts: dict) -> list[str]:
    problems = []
    commits = {(e["task_id"], e["model"]): e for e in entries if e["kind"] == "commit"}
    sealed_at, waiting = {}, {}  # each commitment: the first seal of its horizon after it
    for e in entries:
        if e["kind"] == "commit":
            waiting.setdefault((e["session"], e["horizon"]), []).append(e)
        elif e["kind"] == "seal":
            for c in waiting.pop((e["session"], e["horizon"]), []):
                sealed_at.setdefault((c["task_id"], c["model"]), e["seq"])
    seen = set()
    for e in (e for e in entries if e["kind"] == "reveal"):
        key = (e["task_id"], e["model"])
        found = [f"{key[0]} {key[1]} revealed twice"] if key in seen else []
        seen.add(key)
        c = commits.get(key)
        if c is None:
            found.append(f"reveals {key[0]} {key[1]}, never committed")
        else:
            if e["seq"] < sealed_at.get(key, math.inf):
                found.append("revealed before its seal")
            found += _opened(e, c, key)
            facts["revealed"] += 1
        problems += [f"{LEDGER}: line {e['seq'] + 1}: {p}" for p in found]
    return problems[:50]


def _opened(e: dict, c: dict, key) -> list[str]:
    """A reveal against its commitment: the payload's task and model, the commitment
    recomputed, the receipt's input times not after the forecast time."""
    p = e["payload"]
    found = []
    if (p.get("task_id"), p.get("model")) != key:
        found.append("its payload is of another task or model")
    if commitment(p, e["nonce"]) != c["commitment"]:
        found.append(f"{key[0]} {key[1]}: SHA-256(payload || nonce) is not the commitment of "
                     f"line {c['seq'] + 1}")
    receipt, t0 = p.get("receipt", {}), pd.Timestamp(p["t_forecast"])
    late = [k for k in ("max_input_time", "context_max_input_time", "history_max_input_time")
            if receipt.get(k) is not None and pd.Timestamp(receipt[k]) > t0]
    if late:
        found.append(f"{key[0]} {key[1]}: {late[0]} {receipt[late[0]]} is after its forecast "
                     f"time {p['t_forecast']}")
    return found


def _run_problems(folder: Path, entries: list[dict]) -> list[str]:
    """The season's run against the reveals, then scored again."""
    from finbench.live.final import on_time_answers

    run_dir = finished_run(folder / "run")
    rows = pd.read_parquet(run_dir / "forecasts.parquet",
                           columns=["task_id", "model", "kind", "p_up", "lower", "upper",
                                    "valid"])
    problems = []
    on_time = {(e["session"], e["horizon"]) for e in entries
               if e["kind"] == "seal" and e["on_time"]}
    sealed = {(e["task_id"], e["model"]): e["payload"]["answer"] for e in entries
              if e["kind"] == "reveal" and (e["session"], e["horizon"]) in on_time}
    targets = pd.read_parquet(run_dir / "tasks.parquet", columns=["task_id", "t_target"])
    target_of = dict(zip(targets["task_id"], targets["t_target"], strict=True))
    seal_of = {(e["session"], e["horizon"]): e for e in entries if e["kind"] == "seal"}
    for e in entries:  # every answer sealed before its outcome existed
        if e["kind"] == "commit" and e["task_id"] in target_of:
            seal = seal_of.get((e["session"], e["horizon"]))
            if seal and seal["tsa_time"] and pd.Timestamp(seal["tsa_time"]) >= pd.Timestamp(
                    target_of[e["task_id"]]):
                problems.append(f"{LEDGER}: line {seal['seq'] + 1}: sealed at "
                                f"{seal['tsa_time']}, not before the target of {e['task_id']}")
    answers = on_time_answers(entries)
    for model, frame in answers.items():
        mine = rows[rows["model"] == model].set_index("task_id")
        if (mine["kind"] == "replay").all():
            extra = sorted(set(mine.index) - set(frame["task_id"]))
            problems += [f"run/forecasts.parquet: {model} has task {t}, which it sealed on "
                         "time no answer for" for t in extra[:SHOWN]]
        for task in frame["task_id"]:
            if task not in mine.index:
                if (mine["kind"] == "replay").all() or not len(mine):
                    problems.append(f"run/forecasts.parquet: {model} lacks task {task}, "
                                    "sealed on time")
                continue
            want, have = sealed[(task, model)], mine.loc[task]
            if bool(want["valid"]) != bool(have["valid"]) or (
                    want["valid"] and not _same(want["p_up"], have["p_up"])):
                problems.append(f"run/forecasts.parquet: {model}, task {task}: p_up "
                                f"{have['p_up']} valid {have['valid']}, but it sealed p_up "
                                f"{want['p_up']} valid {want['valid']}")
    return problems[:50] + rescored(folder, run_dir)


def rescored(folder: Path, run_dir: Path) -> list[str]:
    """The season's run made again, from ``run.toml`` (its paths taken from the live
    directory, wherever it now lies) and the store, into a scratch folder: its score tables
    must hash as the published run's do."""
    import tempfile

    from finbench.core.config import ConfigText
    from finbench.runner.run import run
    from finbench.runner.scores import score_digest

    config = folder / "run.toml"
    with tempfile.TemporaryDirectory(prefix="finbench-verify-") as tmp:
        again = run(ConfigText(str(config.resolve()), config.read_text()), Path(tmp) / "run",
                    echo=lambda *_: None)
        want, have = score_digest(again), score_digest(run_dir)
    if want != have:
        return [f"run/: its score tables (digest {have[:12]}) are not those of the sealed "
                f"answers scored again ({want[:12]})"]
    return []


def _same(a, b) -> bool:
    if a is None or b is None or pd.isna(b):
        return (a is None) == (b is None or pd.isna(b))
    return math.isclose(float(a), float(b), rel_tol=0, abs_tol=0)
