"""Agents FinBench does not call (``kind = "mcp"``, docs/spec.md §12.5): an agent of its own
harness answers each task over the Model Context Protocol (``finbench tools serve``), and the
run waits for it as it waits for a batch.

A run writes the prompt of every task the agent owes into the task's session folder
(:mod:`finbench.runlog.sessions`) and journals every session that has ended: the answer
submitted, read under the track's strict schema like a language model's (an invalid one is
counted, with its reason), or the reason it ended without one (a spent budget). Its tool
calls are receipted as a chat agent's are (in the row's detail, then ``tool_calls.parquet``),
its input digest and ``max_input_time`` cover what they answered, and its transcript holds
the exchange in the chat shape (each call an assistant turn of one call, then its answer),
so ``finbench show`` and the audit read it as any agent's. The forecast table and scores are
written once no task waits.
"""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd

from finbench.core.errors import ConfigError, RunError
from finbench.forecasters.agent import check_tools
from finbench.forecasters.answers import ParsedAnswer
from finbench.forecasters.base import Forecaster, make_record, register
from finbench.runlog.sessions import PROMPT, Session
from finbench.tracks.base import Inputs, Prompt
from finbench.tracks.tools import agent_input_sha256, canonical, instant_text

SUBMIT = "submit_forecast"


@register("mcp")
class McpAgent(Forecaster):
    streaming = True
    external = True  # answers come from outside: the run waits for them (no model call)

    def __init__(self, config, prompt: Prompt | None = None) -> None:
        if prompt is None:
            raise ConfigError(f"models.{config.name}: an agent needs the prompt of the run's "
                              "track (build it with the track's prompt)")
        super().__init__(config, prompt.for_model(config))
        self.toolbox = None  # the track's tools (set by the run, use_tools)
        self.run_dir = None  # where its sessions are (set by the run)
        self.waiting = 0  # tasks the last pass left waiting for the agent

    def use_tools(self, toolbox) -> None:
        """The track's tools (its ``now`` of a task, even for an agent offered none)."""
        check_tools(self.name, list(self.config.tools), toolbox, needed=True)
        self.toolbox = toolbox

    def estimate(self, inputs: Inputs) -> dict:
        """A dry run's count: the tasks the agent would be asked (no call FinBench makes)."""
        return {"calls": len(inputs.tasks), "tokens_in": 0, "tokens_out": 0, "cost": None}

    def _answer(self, inputs: Inputs):  # pragma: no cover - streaming
        raise NotImplementedError("an external agent's answers are journalled by run_stream")

    def facts(self, task: dict, messages: list[dict], sha: str) -> dict:
        """What a task's prompt file holds (read by ``finbench tools serve``)."""
        schema = self.prompt.response_schema()["json_schema"]["schema"]
        return {"task_id": task["task_id"], "model": self.name,
                "now": instant_text(self.toolbox.now(task)), "prompt_sha256": sha,
                "template": self.prompt.template, "messages": messages,
                "tools": self.toolbox.schemas(list(self.config.tools)),
                "answer_schema": schema, "snapshot_sha256": self.toolbox.snapshot_sha256,
                "max_tool_calls": self.config.max_tool_calls}

    def run_stream(self, inputs: Inputs, journal, echo=print, cache=None) -> dict:
        """Each task's ended session journalled (its record and transcript); a prompt file
        written for each task still waiting (:attr:`waiting` counts them)."""
        plan = [(m, self.prompt.sha256(m)) for m in self.prompt.messages(inputs.contexts)]
        ctx_time = inputs.contexts.max_input_time
        records, transcripts, waiting = [], [], 0
        for i, task in enumerate(inputs.tasks.to_dict("records")):
            session = Session(self.run_dir, self.name, task["task_id"])
            facts = self.facts(task, *plan[i])
            answer = session.answer()
            if answer is None:
                session.write_prompt(facts)
                waiting += 1
                continue
            shown = session.prompt()
            for key in ("prompt_sha256", "now", "snapshot_sha256", "tools", "max_tool_calls"):
                if shown.get(key) != facts[key]:
                    raise RunError(f"{session.path(PROMPT)}: its {key} is not the run's for "
                                   f"task {task['task_id']!r} (the session was served another "
                                   "prompt than the run asks): remove the session folder to "
                                   "serve the task again")
            record, transcript = self.record(task, plan[i], ctx_time.iat[i], session, answer)
            records.append(record)
            transcripts.append(transcript)
        if records:
            journal.append_records(records, transcripts=transcripts)
        self.waiting += waiting
        return {"done": len(records), "valid": sum(bool(r["valid"]) for r in records)}

    def record(self, task: dict, planned: tuple[list[dict], str], context_time, session,
               answer: dict) -> tuple[dict, dict]:
        """An ended session's journal record and transcript."""
        messages, sha = planned
        calls = session.calls()
        receipts = [c["receipt"] for c in calls]
        input_sha = agent_input_sha256(sha, [r["result_sha256"] for r in receipts])
        latest = context_time
        for r in receipts:
            if r["max_available"] and (pd.isna(latest) or pd.Timestamp(r["max_available"])
                                       > latest):
                latest = pd.Timestamp(r["max_available"])
        if answer["ended"]:
            raw, parsed = "", ParsedAnswer(False, answer["ended"], "")
        else:
            raw = canonical(answer["arguments"])
            parsed = self.prompt.parse({"content": raw, "finish_reason": "stop"}, self.config)
        refusals = dict(sorted(Counter(r["refusal"] for r in receipts if r["refusal"]).items()))
        detail = {"template": self.prompt.template, "prompt_sha256": sha, "served": "mcp",
                  "client": answer.get("client"), "submitted_at": answer.get("at"),
                  "turns": len(receipts) + (0 if answer["ended"] else 1),
                  "tool_calls": receipts, "refusals": refusals}
        record = make_record(task_id=task["task_id"], model=self.name, kind=self.kind,
                             parsed=parsed, max_input_time=latest,
                             context_max_input_time=context_time,
                             history_max_input_time=pd.NaT, input_sha256=input_sha,
                             detail=json.dumps(detail, sort_keys=True), latency=0.0)
        exchange = []
        for c in calls:
            r = c["receipt"]
            exchange += [{"role": "assistant", "content": None, "tool_calls": [
                {"id": r["call_id"], "type": "function",
                 "function": {"name": r["tool"], "arguments": r["arguments"]}}]},
                {"role": "tool", "tool_call_id": r["call_id"], "content": c["content"]}]
        transcript = {"model": self.name, "task_id": task["task_id"], "attempt": 1,
                      "input_sha256": input_sha, "messages": [*messages, *exchange],
                      "response": {SUBMIT: answer["arguments"], "content": raw,
                                   "ended": answer["ended"]}}
        return record, transcript
