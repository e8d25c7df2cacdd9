"""The forecast table from the journal: order by model then task, last write wins."""

import numpy as np
import pandas as pd

from finbench.journal import FORECAST_SCHEMA, ordered_table


def rows(pairs):
    n = len(pairs)
    table = FORECAST_SCHEMA.empty_table().to_pandas()
    frame = pd.DataFrame({c: [None] * n for c in table.columns})
    frame["task_id"] = [t for t, _, _ in pairs]
    frame["model"] = [m for _, m, _ in pairs]
    frame["p_up"] = [p for _, _, p in pairs]
    frame["valid"] = True
    frame["history_count"] = -1
    import pyarrow as pa

    return pa.Table.from_pandas(frame, schema=FORECAST_SCHEMA, preserve_index=False)


def test_rows_sorted_deduplicated_and_foreign_rows_dropped():
    table = rows([("b", "m2", 0.1), ("a", "m1", 0.2), ("a", "m2", 0.3), ("b", "m1", 0.4),
                  ("zz", "m1", 0.5), ("a", "other", 0.6), ("a", "m1", 0.7)])
    out = ordered_table(table, np.array(["a", "b"], object), ["m1", "m2"]).to_pandas()
    assert list(zip(out["model"], out["task_id"], out["p_up"], strict=True)) == [
        ("m1", "a", 0.7), ("m1", "b", 0.4), ("m2", "a", 0.3), ("m2", "b", 0.1)]


def test_rows_already_in_order_are_returned_as_they_are():
    table = rows([("a", "m1", 0.1), ("b", "m1", 0.2), ("a", "m2", 0.3)])
    assert ordered_table(table, np.array(["a", "b"], object), ["m1", "m2"]) is table
