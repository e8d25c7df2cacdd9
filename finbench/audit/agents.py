"""An agent's rows against the snapshot (docs/spec.md §12.3): every tool call it made is
executed again at its task's ``now`` and must give the answer receipted (digest, items, latest
availability, refusal), with nothing available after ``now``; the transcript's exchange must
be the prompt, then each turn's calls with exactly those answers; the row's input digest and
``max_input_time`` must be those the answers give; an ending without an answer (a spent
budget, a malformed call) must be what its last turn gives again; and ``tool_calls.parquet``
must hold the rows' receipts, no more, no less."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from finbench.audit.rows import capped
from finbench.core.errors import LookaheadError, RunError
from finbench.forecasters.agent import budget_ending, ending, executed_arguments
from finbench.forecasters.completion import completion_dict
from finbench.runlog.tool_calls import TOOL_CALLS, receipts_of
from finbench.runlog.transcripts import Transcripts
from finbench.tracks.tools import agent_input_sha256, call_tool, instant_text


def agent_problems(run_dir: Path, model, toolbox, tasks: pd.DataFrame,
                   prompt_sha: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """Violations of agent ``model``'s rows (its config; ``toolbox``: the track's tools over
    the snapshot; ``tasks``: the run's, ``prompt_sha``: per task id, the digest of its prompt
    re-rendered from the store), and per task id the input digest its row must have."""
    table = pq.read_table(run_dir / "forecasts.parquet", columns=[
        "task_id", "model", "detail", "error", "tokens", "max_input_time",
        "context_max_input_time", "answer_status"])
    rows = table.filter(pc.equal(table.column("model"), model.name)).to_pylist()
    by_id = tasks.set_index("task_id")
    transcripts = _transcripts(run_dir, model.name)
    problems, expected = [], {}
    for row in rows:
        task_id = row["task_id"]
        if task_id not in by_id.index or task_id not in prompt_sha:
            continue  # a row of no task of the run: the receipts' check names it
        where = f"forecasts.parquet ({task_id}, {model.name})"
        detail = json.loads(row["detail"]) if row["detail"] else {}
        receipts = detail.get("tool_calls") or []
        task = {"task_id": task_id, **by_id.loc[task_id].to_dict()}
        now = toolbox.now(task)
        found, shas, latest = _executed_again(where, receipts, toolbox, now, task,
                                              list(model.tools))
        problems += found
        expected[task_id] = agent_input_sha256(prompt_sha[task_id], shas)
        want = _later(row["context_max_input_time"], latest)
        if not _same_time(row["max_input_time"], want):
            problems.append(f"{where}: max_input_time {row['max_input_time']} is not the "
                            f"latest of its context and its tools' answers ({want})")
        call = transcripts.get(task_id)
        if call is not None:
            problems += _exchange_problems(where, call, receipts, prompt_sha[task_id], detail,
                                           row, model)
    problems += _table_problems(run_dir, model.name)
    return capped(problems, f"tool calls of model {model.name}"), expected


def _executed_again(where: str, receipts: list[dict], toolbox, now, task, offered
                    ) -> tuple[list[str], list[str], pd.Timestamp | None]:
    """Each receipted call executed again at ``now``: (violations, the answers' digests, the
    latest availability among them)."""
    problems, shas, latest = [], [], None
    for r in receipts:
        name = f"{where} call {r['call_id']} ({r['tool']} {r['arguments'][:80]})"
        if r["now"] != instant_text(now):
            problems.append(f"{name}: made at now = {r['now']}, not the task's "
                            f"{instant_text(now)}")
        try:
            result = call_tool(toolbox, offered, r["tool"], r["arguments"], now, task)
        except LookaheadError as exc:
            problems.append(f"{name}: {exc}")
            shas.append(None)
            continue
        shas.append(result.sha256)
        if result.max_available is not None:
            latest = result.max_available if latest is None else max(latest, result.max_available)
        again = {"result_sha256": result.sha256, "items": result.items,
                 "max_available": instant_text(result.max_available),
                 "refusal": result.refusal, "item_ids": list(result.ids)}
        for key, value in again.items():
            if r.get(key) != value:
                problems.append(f"{name}: {key} {r.get(key)!r} is not what the call gives "
                                f"again from the snapshot ({value!r})")
        if r.get("max_available") and pd.Timestamp(r["max_available"]) > now:
            problems.append(f"{name}: answered an item available at {r['max_available']}, "
                            f"after now ({instant_text(now)})")
    return problems, shas, latest


def _exchange_problems(where: str, call: dict, receipts: list[dict], prompt: str,
                       detail: dict, row: dict, model) -> list[str]:
    """The transcript's exchange against the receipts: its prompt part (up to the first
    assistant turn) is the prompt re-rendered (by digest, checked with the transcripts), each
    assistant turn's calls are those receipted, each tool message the answer receipted; and
    an ending without an answer is the one its last turn gives again."""
    messages = call["messages"]
    asked = [c for m in messages if m.get("role") == "assistant"
             for c in (m.get("tool_calls") or [])]
    answers = [m for m in messages if m.get("role") == "tool"]
    problems = []
    if len(asked) != len(receipts) or len(answers) != len(receipts):
        problems.append(f"{where}: its transcript holds {len(asked)} tool calls and "
                        f"{len(answers)} answers, its receipts {len(receipts)}")
    for c, a, r in zip(asked, answers, receipts, strict=False):
        function = c.get("function") or {}
        if (c.get("id"), function.get("name"), executed_arguments(function.get(
                "arguments", ""))) != (r["call_id"], r["tool"], r["arguments"]):
            problems.append(f"{where} call {r['call_id']}: the transcript's call is not the "
                            "one receipted")
        text = a.get("content") or ""
        if a.get("tool_call_id") != r["call_id"] or hashlib.sha256(
                text.encode()).hexdigest() != r["result_sha256"]:
            problems.append(f"{where} call {r['call_id']}: the answer in the transcript is "
                            "not the one receipted")
    if detail.get("prompt_sha256") != prompt:
        problems.append(f"{where}: prompt_sha256 is not the prompt re-rendered from the store")
    error = row["error"] or ""
    response = call.get("response") or {}
    if row["answer_status"] == "answered" and "submit_forecast" in response:
        # an agent over MCP: it ended by its answer, or by the call past its budget
        again = response.get("ended")
        if again is not None and again != budget_ending(len(receipts) + 1,
                                                        model.max_tool_calls):
            problems.append(f"{where}: ended {again!r}, which its {len(receipts)} calls "
                            f"under max_tool_calls {model.max_tool_calls} do not give")
        if (again or None) != (error if error.startswith("agent: ") else None):
            problems.append(f"{where}: its error {error!r} is not how its session ended "
                            f"({again or 'with an answer'})")
    elif row["answer_status"] == "answered" and error.startswith("agent: "):
        kept = completion_dict(response.get("body"))
        again = ending(kept.get("tool_calls"), len(receipts), int(detail.get("turns") or 0),
                       int(row["tokens"] or 0), model)
        if again != error:
            problems.append(f"{where}: ended {error!r}, but its last turn gives "
                            f"{again or 'no ending'} again")
    return problems


def _table_problems(run_dir: Path, model: str) -> list[str]:
    """``tool_calls.parquet`` against the receipts in the model's rows."""
    path = run_dir / TOOL_CALLS
    want = receipts_of(run_dir / "forecasts.parquet", [model])
    if not path.is_file():
        return [f"{TOOL_CALLS}: missing, while model {model} made {want.num_rows} tool calls"
                ] if want.num_rows else []
    try:
        have = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        return [f"{TOOL_CALLS}: cannot be read ({exc})"]
    have = have.filter(pc.equal(have.column("model"), model))
    if have.schema != want.schema or not have.equals(want):
        return [f"{TOOL_CALLS}: the rows of model {model} ({have.num_rows}) are not the "
                f"receipts in its forecast rows ({want.num_rows})"]
    return []


def _transcripts(run_dir: Path, model: str) -> dict[str, dict]:
    transcripts = Transcripts(run_dir)
    try:
        return {c["task_id"]: c for c in transcripts.each_last(model) if "unreadable" not in c}
    except RunError:
        return {}  # a damaged file: the transcripts' own check names it
    finally:
        transcripts.close()


def _later(a, b):
    if a is None or pd.isna(a):
        return b
    return a if b is None or pd.Timestamp(a) >= b else b


def _same_time(a, b) -> bool:
    if a is None or pd.isna(a):
        return b is None or pd.isna(b)
    return b is not None and not pd.isna(b) and pd.Timestamp(a) == pd.Timestamp(b)
