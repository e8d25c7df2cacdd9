"""Sealing a horizon's answers and revealing them (docs/live.md): each answer's payload (its
task, model, forecast time, answer and receipt) committed with a fresh 128-bit nonce, the
commitments appended to the ledger, the chain's head time-stamped by the TSA; after the
target, each nonce and payload appended in the clear, so that anyone can recompute every
commitment. The nonces wait in ``private/nonces.jsonl`` (written and synced before their
commitments; never published before the reveal)."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import secrets
from pathlib import Path

import pandas as pd

from finbench.live.ledger import Ledger, commitment
from finbench.live.tsa import TsaError, check_token, encode, request_token

NONCES = Path("private") / "nonces.jsonl"
ANSWER = ("p_up", "lower", "upper", "q_down", "q_flat", "q_up", "valid", "answer_status",
          "error", "raw", "rationale")
RECEIPT = ("input_sha256", "max_input_time", "context_max_input_time",
           "history_max_input_time")


def iso(when) -> str:
    """An instant as ISO 8601 UTC text with a ``Z``, to the microsecond."""
    return pd.Timestamp(when).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def plain(value):
    """A table cell as JSON holds it: None for a missing value, an instant as
    :func:`iso`, numpy's numbers as Python's."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, pd.Timestamp | dt.datetime):
        return None if pd.isna(value) else iso(value)
    if pd.api.types.is_scalar(value) and pd.isna(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def payload(row: dict, t_forecast) -> dict:
    """What a commitment seals of a forecast row: its task, model and forecast time, its
    answer and its receipt."""
    return {"task_id": row["task_id"], "model": row["model"], "t_forecast": iso(t_forecast),
            "answer": {k: plain(row.get(k)) for k in ANSWER},
            "receipt": {k: plain(row.get(k)) for k in RECEIPT}}


class Nonces:
    """The nonces of a live run directory, by (task, model), kept until revealed (read once,
    then held as they are added)."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / NONCES
        self._held: dict[tuple[str, str], str] | None = None

    def read(self) -> dict[tuple[str, str], str]:
        if self._held is None:
            self._held = {}
            if self.path.is_file():
                for line in self.path.read_text().splitlines():
                    if line.strip().endswith("}"):  # a line cut off by a kill is no nonce
                        entry = json.loads(line)
                        self._held[(entry["task_id"], entry["model"])] = entry["nonce"]
        return self._held

    def add(self, rows: list[tuple[str, str, str]]) -> None:
        held = self.read()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as fh:
            for task_id, model, nonce in rows:
                fh.write(json.dumps({"task_id": task_id, "model": model, "nonce": nonce},
                                    sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        held.update({(t, m): n for t, m, n in rows})


def commit_horizon(ledger: Ledger, nonces: Nonces, slot: dict, payloads: list[dict]) -> None:
    """Each payload's commitment appended to the ledger, its nonce kept (and synced) first."""
    kept = nonces.read()
    nonces.add([(p["task_id"], p["model"], secrets.token_hex(16)) for p in payloads
                if (p["task_id"], p["model"]) not in kept])
    kept = nonces.read()
    ledger.append([{
        "kind": "commit", "session": slot["session"], "horizon": slot["horizon"],
        "task_id": p["task_id"], "model": p["model"],
        "commitment": commitment(p, kept[(p["task_id"], p["model"])])} for p in payloads])


def seal_horizon(ledger: Ledger, slot: dict, live, clock, answered_at: dt.datetime) -> dict:
    """The ledger's head time-stamped by the TSA (asked again every two seconds to the
    horizon's deadline while it fails), appended as the horizon's ``seal``: on time when the
    token's time is at or before ``at + seal_within_seconds``; without a token, never on
    time."""
    head = ledger.head()
    deadline = slot["at"] + dt.timedelta(seconds=live.seal_within_seconds)
    root = Path(live.tsa_root).read_bytes()
    token, when, reason = None, None, None
    while True:
        try:
            der = request_token(live.tsa_url, head.encode(), timeout=live.tsa_timeout_seconds)
        except TsaError as exc:
            reason = str(exc)
        else:
            when, reason = check_token(der, head.encode(), root)
            if when is not None:
                token = encode(der)
                break
        if clock.now() >= deadline:
            break
        clock.sleep_until(min(deadline, clock.now() + dt.timedelta(seconds=2)))
    entry = {"kind": "seal", "session": slot["session"], "horizon": slot["horizon"],
             "at": iso(slot["at"]), "deadline": iso(deadline), "head": head,
             "answered_at": iso(answered_at), "token": token,
             "tsa_time": None if when is None else iso(when),
             "on_time": when is not None and when <= deadline}
    if token is None:
        entry["reason"] = reason
    return ledger.append([entry])[0]


def reveal(ledger: Ledger, nonces: Nonces, commits: list[dict],
           payloads: dict[tuple[str, str], dict]) -> None:
    """Each commitment's payload and nonce appended in the clear."""
    held = nonces.read()
    ledger.append([{
        "kind": "reveal", "session": c["session"], "horizon": c["horizon"],
        "task_id": c["task_id"], "model": c["model"],
        "payload": payloads[(c["task_id"], c["model"])],
        "nonce": held[(c["task_id"], c["model"])]} for c in commits])
