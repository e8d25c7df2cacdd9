"""``RUN/stances.jsonl``: what a judge model said of each rationale's stance, one line per
judged rationale, appended as answers arrive (a torn last line of a killed run is asked
again); the calls themselves go to the run's transcripts."""

from __future__ import annotations

import json
import os
from pathlib import Path

from finbench.core.errors import RunError
from finbench.core.outputs import writing
from finbench.runlog.journal import drop_torn_tail
from finbench.runlog.rows import ERROR
from finbench.runlog.transcripts import Transcripts

STANCES_FILE = "stances.jsonl"


class StanceLog:
    """The judge's journal: a call that got no answer is not written, so a later run asks it
    again."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / STANCES_FILE
        self.transcripts = Transcripts(run_dir)

    def keys(self) -> set[tuple[str, str]]:
        return {(r["model"], r["task_id"]) for r in self.records()}

    def records(self) -> list[dict]:
        if not self.path.is_file():
            return []
        data = self.path.read_text(encoding="utf-8")
        lines = data.splitlines()
        if lines and not data.endswith("\n"):
            lines.pop()  # the torn last line of a killed run: its rationale is asked again
        out = []
        for number, line in enumerate(lines, 1):
            try:
                out.append(json.loads(line))
            except ValueError as exc:
                raise RunError(f"{self.path} line {number}: not a JSON record ({exc}); the "
                               "file was edited or damaged: restore it, or delete it to have "
                               "the judge read every rationale again") from None
        return out

    def append_records(self, records: list[dict], *, sync: bool = True,
                       transcripts: list[dict] | None = None) -> None:
        answered = [(r, t) for r, t in zip(records, transcripts or [None] * len(records),
                                           strict=True) if r["answer_status"] != ERROR]
        if not answered:
            return
        self.transcripts.put([t for _, t in answered if t is not None])
        drop_torn_tail(self.path)
        with writing(self.path), open(self.path, "a", encoding="utf-8") as fh:
            fh.write("".join(json.dumps(r, sort_keys=True) + "\n" for r, _ in answered))
            fh.flush()
            if sync:
                os.fsync(fh.fileno())



def judged_stances(run_dir: Path) -> dict[tuple[str, str], str]:
    """(model, task_id) → the judge's stance, from ``stances.jsonl`` (valid answers only)."""
    return {(r["model"], r["task_id"]): r["stance"] for r in StanceLog(run_dir).records()
            if r.get("valid")}
