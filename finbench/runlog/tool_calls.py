"""``tool_calls.parquet``: a receipt for every tool call an agent made (docs/spec.md §12.3),
one row per call, in the forecast table's order (its rows, then each row's calls in the order
made). Each forecast row carries its calls' receipts in its ``detail`` (journalled with the
answer, so a killed run loses none); the table gathers them when the forecast table is
written, and the audit executes every call again against the snapshot.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from finbench.core.outputs import write_atomic

TOOL_CALLS = "tool_calls.parquet"
UTC = pa.timestamp("ns", tz="UTC")
SCHEMA = pa.schema([
    ("task_id", pa.string()), ("model", pa.string()), ("attempt", pa.int64()),
    ("turn", pa.int64()), ("call_id", pa.string()), ("tool", pa.string()),
    ("arguments", pa.string()), ("now", UTC), ("items", pa.int64()),
    ("max_available", UTC), ("result_sha256", pa.string()), ("refusal", pa.string()),
    ("item_ids", pa.list_(pa.string())),
])


def receipts_of(forecasts: Path, models: list[str]) -> pa.Table:
    """Every tool call receipt in the forecast rows of ``models`` (their ``detail``)."""
    table = pq.read_table(forecasts, columns=["task_id", "model", "detail"],
                          filters=[("model", "in", models)] if models else None)
    rows: dict[str, list] = {name: [] for name in SCHEMA.names}
    for task_id, model, detail in zip(*(table.column(c).to_pylist() for c in
                                        ("task_id", "model", "detail")), strict=True):
        facts = json.loads(detail) if detail else {}
        for call in facts.get("tool_calls") or []:
            rows["task_id"].append(task_id)
            rows["model"].append(model)
            rows["attempt"].append(int(facts.get("attempt") or 1))
            for key in SCHEMA.names[3:]:
                rows[key].append(call.get(key, []) if key == "item_ids" else call[key])
    for key in ("now", "max_available"):
        rows[key] = pc.cast(pa.array(rows[key], pa.string()), UTC) if rows[key] else []
    return pa.table({name: pa.array(rows[name], SCHEMA.field(name).type)
                     if not isinstance(rows[name], pa.Array) else rows[name]
                     for name in SCHEMA.names}, schema=SCHEMA)


def write_tool_calls(run_dir: Path, models: list[str]) -> int:
    """Write ``tool_calls.parquet`` of the agents ``models`` from the run's forecast table;
    returns how many calls it holds."""
    table = receipts_of(Path(run_dir) / "forecasts.parquet", models)
    write_atomic(Path(run_dir) / TOOL_CALLS,
                 lambda tmp: pq.write_table(table, tmp, compression="zstd"))
    return table.num_rows
