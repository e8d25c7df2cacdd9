"""Append-only journal of forecast rows: written as answers arrive, read back on resume."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from finbench.forecasters.base import FORECAST_COLUMNS

JOURNAL = "journal.jsonl"
TIME_COLUMNS = ("max_input_time", "context_max_input_time", "history_max_input_time")


class Journal:
    """One JSON line per finished (task, model); a torn last line from a kill is ignored."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / JOURNAL

    def done(self) -> set[tuple[str, str]]:
        return {(r["task_id"], r["model"]) for r in self._records()}

    def append(self, rows: pd.DataFrame) -> None:
        """Append rows and fsync, so a kill after this returns loses none of them."""
        if rows.empty:
            return
        self.append_records(rows[FORECAST_COLUMNS].to_dict("records"))

    def append_records(self, records: list[dict], *, sync: bool = True) -> None:
        """Append plain dict rows (one JSON line each) and flush them to the OS at once."""
        if not records:
            return
        self._drop_torn_tail()
        lines = [json.dumps({k: _plain(rec.get(k)) for k in FORECAST_COLUMNS}, sort_keys=True)
                 for rec in records]
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
            fh.flush()
            if sync:
                os.fsync(fh.fileno())

    def _drop_torn_tail(self) -> None:
        """Cut an unfinished last line (a kill mid-write) so the next append starts clean."""
        if not self.path.is_file() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return
            data = fh.seek(0) or fh.read()
            fh.truncate(data.rfind(b"\n") + 1)

    def _records(self) -> list[dict]:
        if not self.path.is_file():
            return []
        out = []
        with open(self.path, encoding="utf-8") as fh:
            for line in fh:
                if not line.endswith("\n"):
                    break  # torn write from a killed run: that row was not finished
                out.append(json.loads(line))
        return out

    def frame(self) -> pd.DataFrame:
        """Every journalled row as a typed frame (later rows win, though none repeat)."""
        records = self._records()
        frame = pd.DataFrame.from_records(records, columns=FORECAST_COLUMNS)
        frame = frame.drop_duplicates(["task_id", "model"], keep="last")
        for col in TIME_COLUMNS:
            frame[col] = pd.to_datetime(frame[col], utc=True, format="ISO8601").astype(
                "datetime64[ns, UTC]")
        for col in ("p_up", "lower", "upper", "latency"):
            frame[col] = pd.to_numeric(frame[col]).astype(float)
        frame["valid"] = frame["valid"].astype(bool)
        frame["history_count"] = frame["history_count"].astype("int64")
        frame["tokens"] = pd.array(frame["tokens"], dtype="Int64")
        return frame.reset_index(drop=True)


def _plain(value):
    if value is None or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if value is pd.NA:
        return None
    return value
