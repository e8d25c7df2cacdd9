"""Each LLM row against the transcript of its call: the call is kept, its messages are the
prompt re-rendered from the gated context (by digest), and the answer it received is the
row's raw text."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from finbench.audit.rows import capped
from finbench.core.errors import RunError
from finbench.core.lookup import positions
from finbench.forecasters.completion import completion_dict
from finbench.runlog.transcripts import Transcripts
from finbench.tracks.base import messages_sha256


def transcript_problems(run_dir: Path, model: str, ids, prompt_sha: pa.Array,
                        template: str, native: bool = False, agent: bool = False) -> list[str]:
    """Violations of model ``model``'s rows (``ids``: the run's task ids; ``prompt_sha``: per
    task, the digest of the prompt re-rendered from the store, whose ``template`` it names).
    ``agent``: the model called tools, so its transcript's messages are the whole exchange,
    whose prompt is the part before its first turn (the rest: :mod:`finbench.audit.agents`)."""
    table = pq.read_table(run_dir / "forecasts.parquet",
                          columns=["task_id", "model", "raw", "answer_status"])
    table = table.filter(pc.equal(table.column("model"), model))
    task_ids = table.column("task_id").to_pylist()
    raw = dict(zip(task_ids, table.column("raw").to_pylist(), strict=True))
    status = dict(zip(task_ids, table.column("answer_status").to_pylist(), strict=True))
    at = dict(zip(task_ids, positions(table.column("task_id"), ids).tolist(), strict=True))
    want = prompt_sha.to_pylist()
    problems, seen = [], set()
    transcripts = Transcripts(run_dir)
    try:
        for call in transcripts.each_last(model):
            task = call["task_id"]
            if task not in raw:
                continue  # a call of a task the model has no row of: coverage names it
            seen.add(task)
            name = f"{run_dir.name}/transcripts.sqlite ({task}, {model})"
            if "unreadable" in call:
                problems.append(f"{name}: cannot be read ({call['unreadable']})")
                continue
            sent = _prompt_part(call["messages"]) if agent else call["messages"]
            if at[task] < 0 or messages_sha256(sent, template) != want[at[task]]:
                problems.append(f"{name}: the transcript's messages are not the prompt "
                                "re-rendered from the gated context")
            content = _native_text(call["response"]) if native else _content(call["response"])
            if status[task] == "answered" and content is not None and content != raw[task]:
                problems.append(f"{name}: the answer received differs from the row's raw text")
    except RunError as exc:  # the file is damaged: a violation, not a traceback
        problems.append(str(exc))
    finally:
        transcripts.close()
    missing = [f"forecasts.parquet ({task}, {model}): no transcript of its call"
               for task in task_ids if task not in seen]
    return capped(problems, f"transcripts of model {model}") + capped(
        missing, f"rows of model {model} without a transcript")


def _prompt_part(messages: list[dict]) -> list[dict]:
    """An agent's exchange up to its first turn: the prompt it was given."""
    turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    return messages[:turns[0]] if turns else messages


def _native_text(response: dict) -> str | None:
    """What a native head's row keeps as its raw text: the first token's top
    log-probabilities as received (JSON), read from the body as the run read it."""
    kept = completion_dict(response.get("body"))
    return json.dumps(kept["top_logprobs"], sort_keys=True) if "top_logprobs" in kept else None


def _content(response: dict) -> str | None:
    """The text a row keeps as its raw answer, read from the response's body as the run read
    it (:func:`~finbench.forecasters.completion.completion_dict`): the refusal's text, else
    the message content (the text of content parts; empty without one); None for a call
    that got no answer (its row is no answer either)."""
    if "submit_forecast" in response:  # an agent over MCP: what it submitted, as kept
        return response.get("content") or ""
    if "samples" in response:  # a sampled variant: each sample's text, as the row keeps them
        texts = [_content(r) for r in response["samples"]]
        return json.dumps([t or "" for t in texts], ensure_ascii=False)
    kept = completion_dict(response.get("body"))
    if "transport_error" in kept:
        return None
    return kept["refusal"] if kept.get("refusal") else (kept.get("content") or "")
