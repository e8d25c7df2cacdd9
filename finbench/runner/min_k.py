"""Min-K% probability of each task's own text (docs/spec.md §15): for each model with
``min_k_percent``, every task it answered, the user message it was sent (from the run's
transcripts) scored by the model's own token log-probabilities through the completions
endpoint (``echo``), and :func:`~finbench.forecasters.min_k.min_k` of them written to
``min_k.parquet``. A provider that returns no prompt log-probabilities is said so once and
skipped (the manifest's ``min_k_unsupported``); a call that got no answer is a row with its
error, asked again by the next run."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from finbench.core.outputs import write_atomic
from finbench.forecasters.cache import ResponseCache, request_key
from finbench.forecasters.min_k import (
    REFUSED,
    TEMPLATE,
    Unsupported,
    min_k,
    prompt_logprobs,
    text_sha256,
    user_text,
)
from finbench.runlog.rundir import MIN_K
from finbench.runlog.transcripts import Transcripts

SCHEMA = pa.schema([("task_id", pa.string()), ("model", pa.string()), ("k", pa.int64()),
                    ("min_k", pa.float64()), ("tokens", pa.int64()),
                    ("text_sha256", pa.string()),
                    # the child named as Parquet names it, so a table read back writes the
                    # same bytes (a merge of shards)
                    ("lowest", pa.list_(pa.field("element", pa.float64()))),
                    ("error", pa.string())])


def min_k_models(config, skip=()) -> list:
    """The models of ``config`` whose tasks' texts are scored, in its order."""
    return [m for m in config.models if getattr(m, "min_k_percent", None) is not None
            and m.name not in skip]


def measure_min_k(config, out: Path, skip, echo) -> dict[str, str]:
    """Score what is owed and write ``min_k.parquet``; returns, per model whose provider gives
    no prompt log-probabilities, why."""
    models = min_k_models(config, skip)
    if not models:
        return {}
    path = out / MIN_K
    held = (pq.read_table(path).to_pandas() if path.is_file()
            else SCHEMA.empty_table().to_pandas())
    forecasts = pq.read_table(out / "forecasts.parquet", columns=["task_id", "model"])
    asked = forecasts.to_pandas()
    unsupported: dict[str, str] = {}
    new = []
    transcripts = Transcripts(out)
    cache = ResponseCache()
    try:
        for m in models:
            done = set(held.loc[(held["model"] == m.name) & held["error"].isna(), "task_id"])
            texts = {e["task_id"]: user_text(e["messages"]) for e in transcripts.each_last(m.name)}
            todo = [t for t in asked.loc[asked["model"] == m.name, "task_id"]
                    if t not in done and texts.get(t)]
            if not todo:
                continue
            echo(f"{m.name}: Min-{m.min_k_percent}% probability of {len(todo)} task texts")
            try:
                new += asyncio.run(_score(m, [(t, texts[t]) for t in todo], cache))
            except Unsupported as exc:
                unsupported[m.name] = str(exc)
                echo(f"{m.name}: Min-K% skipped: the provider {exc}")
    finally:
        transcripts.close()
        cache.close()
    keep = held[~held.set_index(["model", "task_id"]).index.isin(
        [(r["model"], r["task_id"]) for r in new])]
    frame = pd.concat([keep, pd.DataFrame(new, columns=SCHEMA.names)], ignore_index=True)
    order = {m.name: i for i, m in enumerate(config.models)}
    place = pd.Series(np.arange(len(asked)), index=asked["model"] + "\0" + asked["task_id"])
    frame = frame.assign(_m=frame["model"].map(order), _t=place.reindex(
        frame["model"] + "\0" + frame["task_id"]).to_numpy()).sort_values(["_m", "_t"])
    table = pa.Table.from_pandas(frame[SCHEMA.names], schema=SCHEMA, preserve_index=False)
    write_atomic(path, lambda p: pq.write_table(table.replace_schema_metadata(None), p))
    return unsupported


async def _score(m, texts: list[tuple[str, str]], cache: ResponseCache) -> list[dict]:
    """Each text's row, from the cache or asked (``m.concurrency`` at a time);
    :class:`Unsupported` at the first refusal of the request itself."""
    import openai
    from openai import AsyncOpenAI

    base_url = m.base_url or (os.environ.get(m.base_url_env) if m.base_url_env else None)
    client = AsyncOpenAI(api_key=os.environ.get(m.api_key_env, ""), base_url=base_url,
                         timeout=m.timeout, max_retries=m.max_retries)
    gate = asyncio.Semaphore(m.concurrency)
    refused: list[str] = []

    async def one(task_id: str, text: str) -> dict:
        sha = text_sha256(text)
        row = {"task_id": task_id, "model": m.name, "k": m.min_k_percent, "min_k": np.nan,
               "tokens": None, "text_sha256": sha, "lowest": None, "error": None}
        key = request_key(base_url=base_url or "", model=m.model,
                          params={"template": TEMPLATE}, messages_sha256=sha)
        body = cache.get(key)
        if body is None:
            async with gate:
                if refused:
                    return row
                try:
                    reply = await client.completions.create(
                        model=m.model, prompt=text, max_tokens=1, echo=True, logprobs=0,
                        temperature=0)
                except openai.APIStatusError as exc:
                    if exc.status_code in REFUSED:
                        refused.append(f"refused the request (HTTP {exc.status_code}: "
                                       f"{exc.message})")
                        return row
                    return {**row, "error": f"HTTP {exc.status_code}: {exc.message}"}
                except openai.APIConnectionError as exc:
                    return {**row, "error": f"transport: {exc}"}
            body = reply.model_dump()
            try:
                prompt_logprobs(body)
            except Unsupported as exc:
                refused.append(str(exc))
                return row
            cache.put(key, body)
        score, tokens, lowest = min_k(prompt_logprobs(body), m.min_k_percent)
        return {**row, "min_k": score, "tokens": tokens, "lowest": lowest}

    try:
        rows = await asyncio.gather(*(one(t, text) for t, text in texts))
    finally:
        await client.close()
    if refused:
        raise Unsupported(refused[0])
    return list(rows)
