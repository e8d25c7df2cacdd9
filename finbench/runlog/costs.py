"""What a forecast cost to make, per row of ``rows.*`` and ``rows3.*`` (docs/spec.md, the run
directory): ``calls`` (model requests), ``tool_calls``, ``tokens`` (prompt and completion, as
the provider billed them) and ``dollars`` (those tokens at the model's configured prices).

A cost is of the forecast as made, not of this run's work: an answer read back from the
completion cache costs what the call that made it cost (else a resumed run's rows would
differ from a run never stopped). Null means FinBench cannot know: an agent over MCP makes
its model calls itself (its ``tool_calls`` are known, its calls and tokens are not); a
replayed answer was made elsewhere; a provider that reported no usage; prices not given. A
forecaster that calls no model (a baseline, a reference, a scripted answer) costs nothing: 0.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa

COST_COLUMNS = ("calls", "tool_calls", "tokens", "dollars")
EXTERNAL_KINDS = ("mcp",)  # they call their model themselves
UNKNOWN_KINDS = ("replay",)  # answers made elsewhere
CALLING_KINDS = ("openai",)  # FinBench calls the model: each row's detail says what it cost


def prices_of(model) -> tuple[float, float] | None:
    """A model config's prices per million prompt and completion tokens (None unless both
    are given)."""
    price_in = getattr(model, "price_input_per_1m", None)
    price_out = getattr(model, "price_output_per_1m", None)
    return None if price_in is None or price_out is None else (price_in, price_out)


def needs_detail(kind: str) -> bool:
    """Whether a model's costs are read from its rows' ``detail`` (else they are constant)."""
    return kind in CALLING_KINDS or kind in EXTERNAL_KINDS


def cost_arrays(kind: str, n: int, detail=None, tokens=None,
                prices: tuple[float, float] | None = None) -> dict[str, pa.Array]:
    """The :data:`COST_COLUMNS` of ``n`` rows of one model of ``kind``. For a kind FinBench
    calls, ``detail`` (each row's detail JSON text) and ``tokens`` (each row's tokens,
    None where none were reported) give them: ``calls`` its agent's turns (1 without tools;
    a sampled variant's samples), ``tool_calls`` the receipts, ``dollars`` from the prompt and
    completion tokens (an agent's summed over its turns, a sampled variant's over its
    samples)."""
    if kind in UNKNOWN_KINDS:
        return _columns(*(np.full(n, -1) for _ in range(3)), np.full(n, np.nan))
    if not needs_detail(kind):
        return _columns(np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64),
                        np.zeros(n))
    if len(detail) != n or len(tokens) != n:
        raise ValueError(f"costs of {n} rows from {len(detail)} details and {len(tokens)} "
                         "token counts")
    calls, tool_calls = np.full(n, -1, np.int64), np.zeros(n, np.int64)
    billed, dollars = np.full(n, -1, np.int64), np.full(n, np.nan)
    external = kind in EXTERNAL_KINDS
    for i, text in enumerate(detail):
        d = json.loads(text) if text else {}
        tool_calls[i] = len(d.get("tool_calls") or ())
        if external:
            continue
        calls[i] = d.get("turns") or len(d.get("samples") or ()) or 1
        if tokens[i] is not None and not (isinstance(tokens[i], float) and np.isnan(tokens[i])):
            billed[i] = int(tokens[i])
        prompt, completion = d.get("prompt_tokens"), d.get("completion_tokens")
        if prices is not None and prompt is not None and completion is not None:
            dollars[i] = (prompt * prices[0] + completion * prices[1]) / 1e6
    return _columns(calls, tool_calls, billed, dollars)


def _columns(calls, tool_calls, tokens, dollars) -> dict[str, pa.Array]:
    """Arrow columns, null where an integer is -1 or a dollar amount NaN (not known)."""
    out = {name: pa.array(np.asarray(v, np.int64), pa.int64(), mask=np.asarray(v) < 0)
           for name, v in (("calls", calls), ("tool_calls", tool_calls), ("tokens", tokens))}
    out["dollars"] = pa.array(dollars, pa.float64(), mask=np.isnan(dollars))
    return out


def cost_frame(rows: pd.DataFrame, models) -> pd.DataFrame:
    """The :data:`COST_COLUMNS` of forecast rows of several models (a frame with ``model``,
    ``detail`` and ``tokens``), in the rows' order; ``models``: the run's model configs.
    Counts are nullable integers, ``dollars`` a float (NaN: not known)."""
    by_name = {m.name: m for m in models}
    names = rows["model"].to_numpy(object)
    parts = []
    for name in pd.unique(names):
        at = np.flatnonzero(names == name)
        model, mine = by_name[name], rows.iloc[at]
        costs = (cost_arrays(model.kind, len(at), mine["detail"].tolist(),
                             [None if pd.isna(t) else int(t) for t in mine["tokens"]],
                             prices_of(model)) if needs_detail(model.kind)
                 else cost_arrays(model.kind, len(at)))
        part = pa.table(costs).to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
        parts.append(part.set_axis(rows.index[at]))
    if not parts:
        return pd.DataFrame({c: pd.Series([], dtype="Int64" if c != "dollars" else float)
                             for c in COST_COLUMNS}, index=rows.index)
    return pd.concat(parts).reindex(rows.index)
