"""An external agent's sessions (docs/spec.md §12.5): one folder a task,
``sessions/<model>/<task>/`` in the run directory (both names percent-encoded), holding

- ``prompt.json``, written by the run for a task it waits for: the task, its ``now``, the
  messages of its prompt and their digest, the tools offered (their schemas), the answer's
  schema, the snapshot and the budget;
- ``calls.jsonl``, written by ``finbench tools serve``: a line a tool call (its receipt, as
  a chat agent's, and the answer's text), each synced before the answer is sent;
- ``answer.json``, written once by the server, whole or not at all: what the agent submitted
  (``arguments``), or why its task ended without (``ended``: a spent budget). Nothing is
  written to the session after it; the run reads it into its journal on its next pass.

The server holds the folder's lock while it serves, so one session at a time serves a task;
sessions of other tasks may be served at once, beside a run of the folder.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from finbench.core.errors import RunError
from finbench.core.outputs import write_json

SESSIONS = "sessions"
PROMPT, CALLS, ANSWER = "prompt.json", "calls.jsonl", "answer.json"


def _name(text: str) -> str:
    return quote(text, safe="")  # a task id holds '|': every name is one folder


@dataclass(frozen=True)
class Session:
    """The session folder of ``task_id`` of ``model`` in ``run_dir``."""

    run_dir: Path
    model: str
    task_id: str

    @property
    def folder(self) -> Path:
        return Path(self.run_dir) / SESSIONS / _name(self.model) / _name(self.task_id)

    def path(self, name: str) -> Path:
        return self.folder / name

    # -- the prompt (the run's) -----------------------------------------------------------
    def write_prompt(self, facts: dict) -> None:
        """The task's prompt file (the same bytes however often the run writes it)."""
        path = self.path(PROMPT)
        if path.is_file() and _json(path) == facts:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, facts)

    def prompt(self) -> dict:
        path = self.path(PROMPT)
        if not path.is_file():
            raise RunError(f"{path}: no prompt: task {self.task_id!r} is no task model "
                           f"{self.model!r} waits for (`finbench tools tasks {self.run_dir}` "
                           "lists those it does)")
        return _json(path)

    # -- the calls and the answer (the server's) ------------------------------------------
    def calls(self) -> list[dict]:
        """The calls made so far (a line torn by a kill is no call: it was never answered)."""
        path = self.path(CALLS)
        if not path.is_file():
            return []
        out = []
        for number, line in enumerate(path.read_text().splitlines(keepends=True), 1):
            if not line.endswith("\n"):
                break
            try:
                out.append(json.loads(line))
            except ValueError as exc:
                raise RunError(f"{path}: line {number} is no JSON ({exc})") from None
        return out

    def add_call(self, receipt: dict, content: str) -> None:
        """One call's line, synced (a torn last line, from a kill, is cut first)."""
        path = self.path(CALLS)
        kept = sum(len(line.encode()) for line in
                   path.read_text().splitlines(keepends=True) if line.endswith("\n")
                   ) if path.is_file() else 0
        line = json.dumps({"receipt": receipt, "content": content, "at": _now()},
                          sort_keys=True, ensure_ascii=False) + "\n"
        with open(path, "a+b") as f:
            f.truncate(kept)
            f.write(line.encode())
            f.flush()
            os.fsync(f.fileno())

    def answer(self) -> dict | None:
        path = self.path(ANSWER)
        return _json(path) if path.is_file() else None

    def write_answer(self, *, arguments: dict | None, ended: str | None, client: dict) -> None:
        if self.path(ANSWER).is_file():
            raise RunError(f"{self.path(ANSWER)}: the task is answered already")
        write_json(self.path(ANSWER), {"arguments": arguments, "ended": ended,
                                       "client": client, "at": _now()})


def waiting(run_dir: Path, model: str | None = None) -> dict[str, list[str]]:
    """Per external agent, the tasks with a prompt and no answer yet (in task-id order)."""
    root = Path(run_dir) / SESSIONS
    out: dict[str, list[str]] = {}
    if not root.is_dir():
        return out
    for folder in sorted(root.iterdir()):
        name = unquote(folder.name)
        if model is not None and name != model:
            continue
        out[name] = sorted(unquote(task.name) for task in folder.iterdir()
                           if (task / PROMPT).is_file() and not (task / ANSWER).is_file())
    return out


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RunError(f"{path}: cannot be read ({exc})") from None


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
