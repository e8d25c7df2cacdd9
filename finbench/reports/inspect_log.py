"""``finbench export inspect RUN``: a run's language-model samples as Inspect evaluation logs
(``.eval``, written through ``inspect_ai``'s own log API, the optional extra ``[inspect]``),
one log per model FinBench prompted (a language model, an agent, an agent over MCP), so that
``inspect view`` browses a FinBench run. Read from the run directory alone.

Each forecast row of the model is a sample: ``id`` its task, ``input`` the messages as sent
(from ``transcripts.sqlite``; an agent's exchange turn by turn in ``messages``), ``target``
the label's outcome (empty where it cannot be scored), ``output`` the answer as received (an
error where none came), ``scores`` the row's own scores from ``rows.parquet`` (each a
``Score`` of its value, the stated probability as its answer), and ``metadata`` the answer
(probability, interval, validity, error), the label and the row's receipts (input digest,
latest input time). The log's header names the run (its folder, its manifest's digest as
``run_id``), the FinBench that made it and the data snapshot; its results hold each score's
mean over the rows scored (the run's own ``scores.parquet`` holds the intervals).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from finbench.core.config import PROMPTED_KINDS
from finbench.core.errors import ConfigError, RunError
from finbench.runlog.rundir import finished_run, load_run_config, read_manifest
from finbench.runlog.transcripts import Transcripts
from finbench.tracks import plugin_of

SCORES = ("brier", "log_loss", "winkler")  # a row's own scores an Inspect sample carries
ANSWER = ("p_up", "lower", "upper", "q_down", "q_flat", "q_up", "valid", "error",
          "answer_status", "rationale", "input_sha256", "max_input_time")


def export_inspect(run_dir: str | Path, out: str | Path | None = None, *,
                   models: list[str] | None = None) -> list[Path]:
    """Write one ``.eval`` log per prompted model of the run (``models``: those only) into
    ``out`` (default ``RUN/inspect``); returns their paths."""
    try:
        from inspect_ai.log import write_eval_log
    except ImportError as exc:
        raise ConfigError("finbench export inspect needs inspect_ai: pip install "
                          "'finbench[inspect]' (or pip install inspect-ai)") from exc
    run_dir = finished_run(run_dir)
    config = load_run_config(run_dir)
    manifest = read_manifest(run_dir)
    prompted = [m for m in config.models if m.kind in PROMPTED_KINDS
                and m.name not in (manifest.get("skipped_models") or {})]
    if models is not None:
        unknown = [n for n in models if n not in {m.name for m in prompted}]
        if unknown:
            raise RunError(f"{run_dir}: no language model {unknown[0]!r} to export (the run's: "
                           f"{', '.join(m.name for m in prompted) or 'none'})")
        prompted = [m for m in prompted if m.name in models]
    if not prompted:
        raise RunError(f"{run_dir}: the run has no language model's samples to export")
    out = Path(out) if out is not None else run_dir / "inspect"
    out.mkdir(parents=True, exist_ok=True)
    forecasts = pd.read_parquet(run_dir / "forecasts.parquet",
                                filters=[("model", "in", [m.name for m in prompted])])
    scored = pd.read_parquet(run_dir / "rows.parquet")
    labels = pd.read_parquet(run_dir / "labels.parquet").set_index("task_id")
    outcomes = plugin_of(config).outcomes
    paths = []
    transcripts = Transcripts(run_dir)
    try:
        for model in prompted:
            mine = forecasts[forecasts["model"] == model.name]
            log = _log(run_dir, manifest, config, model, mine,
                       scored[scored["model"] == model.name].set_index("task_id"), labels,
                       outcomes, transcripts)
            path = out / f"{quote(model.name, safe='')}.eval"
            write_eval_log(log, str(path))
            paths.append(path)
    finally:
        transcripts.close()
    return paths


def _log(run_dir: Path, manifest: dict, config, model, rows: pd.DataFrame,
         scored: pd.DataFrame, labels: pd.DataFrame, outcomes, transcripts):
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
    )
    from inspect_ai.model import ModelUsage

    samples = [_sample(r, scored, labels, outcomes, transcripts, model)
               for r in rows.itertuples(index=False)]
    manifest_sha = hashlib.sha256((run_dir / "manifest.json").read_bytes()).hexdigest()
    data = manifest.get("data") or {}
    spec = EvalSpec(
        created=manifest.get("finished_at") or manifest.get("started_at"),
        task=f"finbench/{plugin_of(config).name}", task_id=manifest.get("config_sha256", "")[:22],
        run_id=manifest_sha[:22], model=_model_id(model),
        dataset=EvalDataset(name=run_dir.name, samples=len(samples),
                            sample_ids=[s.id for s in samples]),
        config=EvalConfig(), task_args={},
        metadata={"finbench": manifest.get("package_version"),
                  "engine_version": manifest.get("engine_version"),
                  "scoring_rules_version": manifest.get("scoring_rules_version"),
                  "config_sha256": manifest.get("config_sha256"),
                  "manifest_sha256": manifest_sha,
                  "snapshot_sha256": data.get("snapshot_sha256"),
                  "synthetic": bool(data.get("synthetic")), "model": model.name,
                  "kind": model.kind})
    means = []
    for name in SCORES:
        values = [s.scores[name].value for s in samples if name in s.scores]
        if values:
            means.append(EvalScore(name=name, scorer="finbench", scored_samples=len(values),
                                   unscored_samples=len(samples) - len(values),
                                   metrics={"mean": EvalMetric(name="mean",
                                                               value=sum(values) / len(values))}))
    usage = [u for s in samples for u in s.model_usage.values()]
    total = ModelUsage(input_tokens=sum(u.input_tokens for u in usage),
                       output_tokens=sum(u.output_tokens for u in usage),
                       total_tokens=sum(u.total_tokens for u in usage))
    return EvalLog(eval=spec, status="success", samples=samples,
                   stats=EvalStats(started_at=manifest.get("started_at") or "",
                                   completed_at=manifest.get("finished_at") or "",
                                   model_usage={spec.model: total} if usage else {}),
                   results=EvalResults(total_samples=len(samples),
                                       completed_samples=len(samples), scores=means))


def _sample(row, scored: pd.DataFrame, labels: pd.DataFrame, outcomes, transcripts, model):
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Score

    calls = transcripts.of(row.task_id, row.model)
    sent = calls[-1].get("messages") or [] if calls else []
    messages = [_message(m) for m in sent]
    prompt = messages[:_prompt_length(sent)]
    raw = "" if row.raw is None or (isinstance(row.raw, float) and math.isnan(row.raw)) \
        else str(row.raw)
    got = row.answer_status != "error"
    output = ModelOutput.from_content(model=_model_id(model), content=raw if got else "",
                                      error=None if got else str(row.error))
    if got:
        messages.append(output.message)
    label = labels.loc[row.task_id] if row.task_id in labels.index else None
    ok = label is not None and label["status"] == "ok"
    target = outcomes[int(label["y"])] if ok and pd.notna(label["y"]) else ""
    scores = {}
    if row.task_id in scored.index:
        s = scored.loc[row.task_id]
        for name in SCORES:
            if name in s.index and pd.notna(s[name]):
                scores[name] = Score(value=float(s[name]), answer=None if pd.isna(row.p_up)
                                     else repr(float(row.p_up)),
                                     explanation=f"{name} of the stated "
                                     + ("interval" if name == "winkler" else "probability"))
    meta = {k: _plain(getattr(row, k)) for k in ANSWER if hasattr(row, k)}
    meta.update(label_status=None if label is None else str(label["status"]),
                y=None if not ok else _plain(label["y"]),
                attempts=len(calls), detail=json.loads(row.detail) if row.detail else None)
    detail = meta["detail"] or {}
    usage = {}
    if detail.get("prompt_tokens") is not None and detail.get("completion_tokens") is not None:
        from inspect_ai.model import ModelUsage

        usage[_model_id(model)] = ModelUsage(
            input_tokens=detail["prompt_tokens"], output_tokens=detail["completion_tokens"],
            total_tokens=detail["prompt_tokens"] + detail["completion_tokens"],
            reasoning_tokens=detail.get("reasoning_tokens"))
    return EvalSample(id=row.task_id, epoch=1, input=prompt or raw, target=target,
                      messages=messages, output=output, scores=scores, metadata=meta,
                      model_usage=usage)


def _prompt_length(messages: list[dict]) -> int:
    """How many of a call's messages were its prompt (those before an agent's first turn)."""
    for i, m in enumerate(messages):
        if m.get("role") in ("assistant", "tool"):
            return i
    return len(messages)


def _message(m: dict):
    """A chat message as sent, as Inspect's (an assistant's tool calls and a tool's answer
    kept)."""
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
    )
    from inspect_ai.tool import ToolCall

    role, content = m.get("role"), m.get("content") or ""
    if role == "system":
        return ChatMessageSystem(content=content)
    if role == "assistant":
        calls = []
        for c in m.get("tool_calls") or []:
            function = c.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
                error = None
            except ValueError as exc:
                arguments, error = {}, f"arguments are no JSON: {exc}"
            calls.append(ToolCall(id=c.get("id", ""), function=function.get("name", ""),
                                  arguments=arguments if isinstance(arguments, dict) else
                                  {"value": arguments}, parse_error=error))
        return ChatMessageAssistant(content=content, tool_calls=calls or None)
    if role == "tool":
        return ChatMessageTool(content=content, tool_call_id=m.get("tool_call_id"))
    return ChatMessageUser(content=content)


def _model_id(model) -> str:
    """Inspect's ``provider/model`` of a FinBench model (an agent over MCP: ``mcp/NAME``)."""
    served = getattr(model, "model", None)
    return f"openai/{served}" if served else f"{model.kind}/{model.name}"


def _plain(value):
    """A value for JSON metadata: numbers and text as they are, NaN and NaT as None, times as
    ISO text."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, pd.Timestamp):
        return None if pd.isna(value) else value.isoformat()
    if hasattr(value, "item"):
        return value.item()
    return value
