"""An agent's turns on one task (docs/spec.md §12): the model is asked with the track's
tools; each tool call it makes is answered by the track's :class:`~finbench.tracks.tools.ToolBox`
at the task's ``now`` and handed back; it goes on until the model answers without calling a
tool, or its budget (tool calls, turns, tokens) is spent.

A call the tools refuse (a window after ``now``, arguments that break the tool's schema, a
tool it does not have) goes back to the model as that refusal, so it may ask again; a turn
whose tool calls are no list of function calls (no id, no name, arguments that are no text)
ends the task, as does a spent budget: the task's answer is then invalid, with the reason.
Every call is receipted (:func:`receipt`): the tool, its arguments in canonical form (as
executed: the audit executes them again), ``now``, what the answer holds and its digest.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from finbench.core.errors import ConfigError
from finbench.tracks.tools import call_tool, canonical, instant_text


@dataclass
class AgentRun:
    """What an agent did on one task: ``messages``, the whole exchange sent at its last turn
    (the prompt, each assistant turn with its tool calls, each tool's answer); ``response``,
    its last response (``agent_error`` set when it ended without an answer); ``receipts``,
    one per tool call; ``turns``, the model calls made; ``tokens``, their prompt and
    completion tokens summed (``prompt_tokens``, ``completion_tokens``, ``reasoning_tokens``:
    each summed apart, None once a turn reported none)."""

    messages: list[dict]
    response: dict
    receipts: list[dict] = field(default_factory=list)
    turns: int = 0
    tokens: int = 0
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0
    reasoning_tokens: int | None = 0

    def count(self, usage: dict) -> None:
        """Add one turn's usage (its response's ``usage``)."""
        self.tokens += (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0)
        reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
        for key, value in (("prompt_tokens", usage.get("prompt_tokens")),
                           ("completion_tokens", usage.get("completion_tokens")),
                           ("reasoning_tokens", reasoning)):
            so_far = getattr(self, key)
            setattr(self, key, None if value is None or so_far is None else so_far + value)

    @property
    def refusals(self) -> dict[str, int]:
        return dict(sorted(Counter(r["refusal"] for r in self.receipts if r["refusal"]).items()))

    def max_available(self) -> pd.Timestamp | None:
        """The latest availability of anything a tool answered (None: nothing)."""
        times = [pd.Timestamp(r["max_available"]) for r in self.receipts if r["max_available"]]
        return max(times) if times else None


def messages_digest(messages: list[dict]) -> str:
    """SHA-256 of an exchange so far (the key of its next completion, with the request's
    parameters)."""
    return hashlib.sha256(canonical(messages).encode()).hexdigest()


def check_tools(model: str, names: list[str], toolbox, *, needed: bool = False) -> None:
    """A ConfigError when model ``model``'s ``tools`` are not all the track's (``toolbox``:
    the track's, None when it offers none; ``needed``: the model needs the track's tools
    whatever it names, for its tasks' ``now``)."""
    if toolbox is None and (names or needed):
        raise ConfigError(f"models.{model}.tools: the run's track offers no tools")
    unknown = [n for n in names if n not in toolbox.names]
    if unknown:
        raise ConfigError(f"models.{model}.tools: {', '.join(map(repr, unknown))} not among "
                          f"the track's tools ({', '.join(toolbox.names)})")


def budget_ending(asked: int, most: int) -> str:
    """The ending of a task whose agent asked its ``asked``-th tool call, past ``most``."""
    return f"agent: budget: {asked} tool calls asked, at most {most} a task (max_tool_calls)"


def call_problem(call) -> str | None:
    """Why a tool call of a response is none FinBench can execute (None: it is one)."""
    if not isinstance(call, dict):
        return "a tool call is no object"
    if not isinstance(call.get("id"), str) or not call["id"]:
        return "a tool call without an id"
    function = call.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return "a tool call without a function name"
    if not isinstance(function.get("arguments", ""), str):
        return f"tool call {call['id']}: arguments are no JSON text"
    return None


def executed_arguments(text: str) -> str:
    """A call's arguments as executed and receipted: their canonical JSON when they are JSON
    (the same value, so the same answer), else the text as sent."""
    try:
        return canonical(json.loads(text))
    except ValueError:
        return text


def receipt(turn: int, call: dict, arguments: str, now: pd.Timestamp, result) -> dict:
    """One tool call's receipt (a row of ``tool_calls.parquet``, in the forecast row's
    detail until then)."""
    return {"turn": turn, "call_id": call["id"], "tool": call["function"]["name"],
            "arguments": arguments, "now": instant_text(now), "items": result.items,
            "max_available": instant_text(result.max_available),
            "result_sha256": result.sha256, "refusal": result.refusal,
            "item_ids": list(result.ids)}


async def converse(ask, toolbox, task, messages: list[dict], config) -> AgentRun | None:
    """The agent's turns on ``task`` from the prompt ``messages``; ``ask(messages, now)`` is
    one model call (awaited; None once the model cannot be called at all, which ends the
    task unanswered: None). ``config``: the model's (its budgets). A tool call is made here,
    on the event loop (a date the tools hold answers in about a millisecond: a thread hop
    would cost more; a date read first holds the other tasks' turns for its read)."""
    now = toolbox.now(task)
    run = AgentRun(list(messages), {})
    while True:
        response = await ask(run.messages, now)
        if response is None:
            return None
        run.turns += 1
        run.response = response
        run.count(response.get("usage") or {})
        calls = response.get("tool_calls")
        if {"transport_error", "request_refused"} & response.keys() or not calls:
            return run  # no answer (asked again by the next run), or the answer
        end = ending(calls, len(run.receipts), run.turns, run.tokens, config)
        if end:
            run.response = {**response, "agent_error": end}
            return run
        run.messages.append({"role": "assistant", "content": response.get("content"),
                             "tool_calls": calls})
        for call in calls:
            arguments = executed_arguments(call["function"].get("arguments", ""))
            result = call_tool(toolbox, config.tools, call["function"]["name"], arguments,
                               now, task)
            run.receipts.append(receipt(run.turns, call, arguments, now, result))
            run.messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "content": result.content})


def ending(calls, receipts: int, turns: int, tokens: int, config) -> str | None:
    """Why an agent's turn asking ``calls`` (its response's ``tool_calls``) ends its task
    without an answer, after ``receipts`` calls made in ``turns`` turns using ``tokens``
    (None: the calls are made). The audit asks it again of the last turn of each agent row
    that ended so."""
    problem = ("tool_calls is no list" if not isinstance(calls, list) else
               next(filter(None, map(call_problem, calls)), None))
    if problem:
        return f"agent: malformed tool call ({problem})"
    if receipts + len(calls) > config.max_tool_calls:
        return budget_ending(receipts + len(calls), config.max_tool_calls)
    if turns >= config.max_turns:
        return f"agent: budget: no answer after {turns} turns (max_turns {config.max_turns})"
    if config.max_task_tokens is not None and tokens > config.max_task_tokens:
        return (f"agent: budget: {tokens} tokens used, more than {config.max_task_tokens} a "
                "task (max_task_tokens)")
    return None
