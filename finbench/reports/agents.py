"""What an agent did, per model, read from a run's recorded files (``forecasts.parquet`` and
``tool_calls.parquet``, docs/spec.md §12.4): the tasks it answered, its tool calls and turns
per task, its refusals by kind, and how many of its valid answers cite an item a search
answered it (a headline, post or market id named in its rationale). Both tracks' reports
show it; each pairs the agents with their models without tools by its own clustering."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from finbench.tracks.tools import REFUSALS

USAGE_COLUMNS = ["model", "tasks", "calls_per_task", "turns_per_task",
                 *(f"refused_{kind}" for kind in REFUSALS), "valid", "citing", "citing_share"]


def agents_of(config) -> list[str]:
    """The run's agents (its models with tools), in the config's order."""
    return [m.name for m in config.models if getattr(m, "tools", None)]


def twin_of(config, agent: str) -> str | None:
    """The model of the run asking the same provider's same model in the same prompt
    variant without tools, the agent's twin (its first, in the config's order), None
    without one."""
    model = next(m for m in config.models if m.name == agent)
    if getattr(model, "model", None) is None:
        return None  # an agent over MCP: which model it asks is its harness's own
    for other in config.models:
        if (other.name != agent and other.kind == model.kind and not other.tools
                and (other.model, other.base_url, other.base_url_env, other.prompt)
                == (model.model, model.base_url, model.base_url_env, model.prompt)):
            return other.name
    return None


def agent_usage(run_dir: Path, agents: list[str]) -> pd.DataFrame:
    """Per agent of ``agents``: its rows (tasks), tool calls and turns per task, the
    refusals it got by kind (calls), its valid answers and those among them whose rationale
    names an id a search answered it for that task."""
    if not agents:
        return pd.DataFrame(columns=USAGE_COLUMNS)
    rows = pq.read_table(run_dir / "forecasts.parquet", columns=[
        "task_id", "model", "valid", "rationale", "detail"],
        filters=[("model", "in", agents)]).to_pylist()
    out = []
    for agent in agents:
        mine = [r for r in rows if r["model"] == agent]
        details = [json.loads(r["detail"]) if r["detail"] else {} for r in mine]
        calls = [d.get("tool_calls") or [] for d in details]
        refusals = {kind: sum(c["refusal"] == kind for made in calls for c in made)
                    for kind in REFUSALS}
        valid = [r["valid"] for r in mine]
        citing = sum(bool(v) and _cites(r["rationale"], made)
                     for r, v, made in zip(mine, valid, calls, strict=True))
        n, answered = len(mine), sum(bool(v) for v in valid)
        out.append({"model": agent, "tasks": n,
                    "calls_per_task": sum(map(len, calls)) / n if n else float("nan"),
                    "turns_per_task": sum(int(d.get("turns") or 0) for d in details) / n
                    if n else float("nan"),
                    **{f"refused_{k}": v for k, v in refusals.items()},
                    "valid": answered, "citing": citing,
                    "citing_share": citing / answered if answered else float("nan")})
    return pd.DataFrame(out, columns=USAGE_COLUMNS)


def _cites(rationale: str | None, calls: list[dict]) -> bool:
    """Whether a rationale names an id one of the task's searches answered."""
    if not rationale:
        return False
    return any(item in rationale for call in calls for item in call.get("item_ids") or [])
