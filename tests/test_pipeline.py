"""Month-by-month processing gives exactly what one pass over all the data gives."""

import numpy as np
import pandas as pd

from finbench.data.store import Store
from finbench.tracks.intraday.config import RunConfig
from finbench.tracks.intraday.contexts import context_chunks
from finbench.tracks.intraday.gate import ContextIndex
from finbench.tracks.intraday.label_pass import resolve
from finbench.tracks.intraday.labels import compute_labels
from finbench.tracks.intraday.momentum import momentum_sign
from finbench.tracks.intraday.plan import month_ranges, month_rows, plan_run


def config(store):
    return RunConfig.model_validate({
        "data": {"store": str(store)},
        "tasks": {"tickers": ["AAPL", "MSFT", "NVDA"], "start": "2024-12-02",
                  "end": "2025-01-15"},
        "models": [{"name": "m", "kind": "momentum", "window": 20}],
    })


def test_quarter_ranges_cover_the_span_without_gaps():
    import datetime as dt

    from finbench.tracks.intraday.plan import quarter_ranges

    d = dt.date
    assert quarter_ranges(d(2024, 11, 20), d(2025, 4, 2)) == [
        (d(2024, 11, 20), d(2024, 12, 31)), (d(2025, 1, 1), d(2025, 3, 31)),
        (d(2025, 4, 1), d(2025, 4, 2))]
    assert quarter_ranges(d(2025, 2, 3), d(2025, 2, 3)) == [(d(2025, 2, 3), d(2025, 2, 3))]


def test_month_ranges_cover_the_span_without_gaps():
    import datetime as dt

    ranges = month_ranges(dt.date(2024, 11, 20), dt.date(2025, 1, 15))
    assert ranges == [(dt.date(2024, 11, 20), dt.date(2024, 11, 30)),
                      (dt.date(2024, 12, 1), dt.date(2024, 12, 31)),
                      (dt.date(2025, 1, 1), dt.date(2025, 1, 15))]


def test_chunked_passes_equal_one_pass(sample_store):
    plan = plan_run(config(sample_store))
    resolved = resolve(plan, momentum_minutes={30})
    store = Store(sample_store)
    everything = plan.all_tasks
    bars = store.read_bar_arrays(tickers=["AAPL", "MSFT", "NVDA"], start=plan.first_date)
    whole = compute_labels(everything, bars)
    chunked = resolved.labels_of(everything)
    pd.testing.assert_frame_equal(chunked, whole)
    assert len(month_ranges(plan.first_date, plan.config.tasks.end)) >= 3
    sign = resolved.history.set_index("task_id").loc[everything["task_id"], "momentum_sign_30"]
    np.testing.assert_array_equal(sign.to_numpy(), momentum_sign(bars, everything, 30))

    one = ContextIndex(plan.tasks, bars, store.read_headlines(), previous_sessions=5,
                       headline_hours=24, max_headlines=20)
    digests, times = [], []
    for _, index, _ in context_chunks(plan, plan.tasks, resolved.daily):
        digests += index.digests()
        times += list(index.max_input_time)
    assert digests == one.digests()
    assert times == list(one.max_input_time)


def test_label_pass_without_summaries_reads_less_and_labels_the_same(sample_store):
    plan = plan_run(config(sample_store))
    full = resolve(plan, momentum_minutes={30})
    lean = resolve(plan, momentum_minutes={30}, daily=False)
    pd.testing.assert_frame_equal(lean.labels, full.labels)
    pd.testing.assert_frame_equal(lean.history, full.history)
    assert lean.daily.empty and not full.daily.empty


def test_momentum_seen_time_is_the_later_bar_and_never_after_the_horizon(sample_store):
    plan = plan_run(config(sample_store))
    h = resolve(plan, momentum_minutes={30}, daily=False).history
    seen = h["momentum_seen_ns_30"].to_numpy()
    has = ~np.isnan(h["momentum_sign_30"].to_numpy())
    assert ((seen >= 0) == has).all() and has.mean() > 0.9
    t_fc = h["t_forecast"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    assert (seen[has] <= t_fc[has]).all()
    # a 1-minute bar that started at T - 1 min is available exactly at T
    assert (seen[has] == t_fc[has]).mean() > 0.5


def test_store_kept_in_another_zone_gives_the_same_labels_and_summaries(sample_store, tmp_path):
    # the same bars partitioned by UTC dates: a session's bars may span two partitions, so the
    # label pass reads whole months (with a day either side) instead of single dates
    bars = Store(sample_store).read_bars()
    utc = Store.open_or_create(tmp_path / "utc", timezone="UTC", synthetic=True)
    utc.add_bars(bars, sources=[{"test": "utc copy"}])
    ny = plan_run(config(sample_store))
    other = plan_run(config(tmp_path / "utc"))
    assert other.store.timezone != other.config.tasks.timezone
    a = resolve(ny, momentum_minutes={30})
    b = resolve(other, momentum_minutes={30})
    pd.testing.assert_frame_equal(b.labels, a.labels)
    pd.testing.assert_frame_equal(b.history, a.history)
    pd.testing.assert_frame_equal(b.daily, a.daily)


def test_partition_written_in_microseconds_reads_the_same_instants(sample_store, tmp_path):
    # a partition rewritten by another tool (DuckDB, Polars) may store ts in microseconds
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    copy = tmp_path / "store"
    shutil.copytree(sample_store, copy)
    day = Store(copy).dates("bars")[5]
    path = copy / f"bars/date={day.isoformat()}/part.parquet"
    table = pq.read_table(path)
    at = table.schema.get_field_index("ts")
    pq.write_table(table.set_column(at, "ts", table.column("ts").cast(
        pa.timestamp("us", tz="UTC"))), path)
    assert pq.read_schema(path).field("ts").type.unit == "us"
    fresh, original = Store(copy).read_day_arrays(day), Store(sample_store).read_day_arrays(day)
    np.testing.assert_array_equal(fresh.ts, original.ts)
    month = Store(copy).read_bar_arrays(start=day, end=day)
    np.testing.assert_array_equal(month.ts, original.ts)


def test_partition_of_many_row_groups_reads_as_the_month_reader_reads_it(sample_store,
                                                                         tmp_path):
    # every row group carries its own ticker dictionary; a ticker filter drops rows of some
    import shutil

    import pyarrow.parquet as pq

    copy = tmp_path / "store"
    shutil.copytree(sample_store, copy)
    store = Store(copy)
    day = store.dates("bars")[3]
    path = copy / f"bars/date={day.isoformat()}/part.parquet"
    table = pq.read_table(path)
    pq.write_table(table, path, row_group_size=37)
    assert pq.ParquetFile(path).metadata.num_row_groups > 3
    names = sorted(set(table.column("ticker").to_pylist()))
    for tickers in (None, names[1:], names[::2]):
        day_arrays = store.read_day_arrays(day, tickers=tickers)
        month = store.read_bar_arrays(tickers=tickers, start=day, end=day)
        assert day_arrays.bounds == month.bounds and len(day_arrays.bounds) == len(
            tickers or names)
        for column in ("ts", "high", "low"):
            np.testing.assert_array_equal(getattr(day_arrays, column), getattr(month, column))


def test_month_rows_and_the_history_rows_of_evaluated_tasks(sample_store):
    plan = plan_run(config(sample_store))
    resolved = resolve(plan, momentum_minutes={30}, daily=False)
    months = month_rows(plan.tasks)
    assert np.array_equal(np.concatenate(months), np.arange(len(plan.tasks)))
    for rows in months:
        assert plan.tasks["session"].iloc[rows].str[:7].nunique() == 1
    rows = np.arange(len(plan.tasks))
    found = resolved.history["task_id"].to_numpy()[resolved.history_rows(rows)]
    assert list(found) == list(plan.tasks["task_id"])
