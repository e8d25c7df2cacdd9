"""The forecast table from the journal: order by model then task, last write wins."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.core.errors import RunError
from finbench.runlog.forecast_table import ordered_table
from finbench.runlog.journal import Journal
from finbench.runlog.rows import FORECAST_SCHEMA


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


def test_background_parts_are_numbered_in_order_and_read_back(tmp_path):
    journal = Journal(tmp_path)
    first = rows([("a", "m1", 0.1), ("b", "m1", 0.2)]).to_pandas()
    second = rows([("a", "m2", 0.3)]).to_pandas()
    journal.append(first, background=True)
    journal.append(second, background=True)
    assert journal.done() == {("a", "m1"), ("b", "m1"), ("a", "m2")}  # waits for the writer
    assert sorted(p.name for p in (tmp_path / "journal.parts").iterdir()) == [
        "000000.parquet", "000001.parquet"]
    again = Journal(tmp_path)  # a resumed run reads the parts from disk, in the order written
    assert again.table().column("p_up").to_pylist() == [0.1, 0.2, 0.3]
    again.append(second)
    assert (tmp_path / "journal.parts" / "000002.parquet").is_file()


def test_a_resumed_journal_numbers_parts_after_the_last_one_on_disk(tmp_path):
    journal = Journal(tmp_path)
    for pairs in ([("a", "m1", 0.1)], [("b", "m1", 0.2)], [("c", "m1", 0.3)]):
        journal.append(rows(pairs))
    (tmp_path / "journal.parts" / "000001.parquet").unlink()  # a gap: 000000, 000002
    Journal(tmp_path).append(rows([("d", "m1", 0.4)]))
    assert Journal(tmp_path).table().column("task_id").to_pylist() == ["a", "c", "d"]
    (tmp_path / "journal.parts" / "notes.parquet").write_bytes(b"")
    with pytest.raises(ValueError, match=r"notes\.parquet: not a journal part"):
        Journal(tmp_path).append(rows([("e", "m1", 0.5)]))


def test_the_writer_thread_is_never_more_than_a_few_parts_behind(tmp_path, monkeypatch):
    import threading

    import finbench.runlog.journal as jn

    gate, write = threading.Event(), jn._write_part
    monkeypatch.setattr(jn, "_write_part", lambda *a: (gate.wait(), write(*a)))
    journal = Journal(tmp_path)
    for i in range(jn.AHEAD):
        journal.append(rows([(f"t{i}", "m1", 0.5)]), background=True)
    waited = threading.Thread(
        target=journal.append, args=(rows([("last", "m1", 0.5)]),), kwargs={"background": True})
    waited.start()
    waited.join(0.3)
    assert waited.is_alive()  # the writer holds AHEAD parts: the next append waits
    gate.set()
    waited.join(5)
    assert not waited.is_alive()
    journal.flush()
    assert len(journal.table()) == jn.AHEAD + 1


def test_a_failed_background_write_is_raised_when_the_journal_is_read(tmp_path):
    journal = Journal(tmp_path)
    journal.append(rows([("a", "m1", 0.1)]).to_pandas(), background=True)
    journal.flush()
    (tmp_path / "journal.parts" / "000001.tmp").mkdir()  # the next part cannot be written
    journal.append(rows([("b", "m1", 0.2)]).to_pandas(), background=True)
    with pytest.raises(OSError):
        journal.table()
    assert [p.name for p in (tmp_path / "journal.parts").glob("*.parquet")] == ["000000.parquet"]


def test_parts_are_numbered_in_order_and_a_failed_one_is_raised(tmp_path):
    journal = Journal(tmp_path)
    paths = [journal.append(rows([(f"t{i}", "m1", 0.5)]), background=True) for i in range(5)]
    assert paths == [tmp_path / "journal.parts" / f"{i:06d}.parquet" for i in range(5)]
    assert journal.append(FORECAST_SCHEMA.empty_table(), background=True) is None  # no part
    journal.flush()
    assert [pq.read_table(p).column("task_id").to_pylist() for p in paths] == [
        [f"t{i}"] for i in range(5)]
    (tmp_path / "journal.parts" / "000005.tmp").mkdir()  # the next part cannot be written
    journal.append(rows([("bad", "m1", 0.5)]), background=True)
    errors = journal.settle()
    assert len(errors) == 1 and isinstance(errors[0], OSError)
    assert sorted(p.name for p in (tmp_path / "journal.parts").glob("*.parquet")) == [
        p.name for p in paths]


def test_forecast_table_streamed_part_by_part_equals_the_table_ordered_in_memory(
        tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    from finbench.runlog import forecast_table

    monkeypatch.setattr(forecast_table, "ROW_GROUP", 3)
    ids = np.array(["a", "b", "c", "d", "e"], object)
    journal = Journal(tmp_path)
    journal.append(rows([(t, "m2", 0.2) for t in ids]).to_pandas())
    journal.append(rows([("a", "m1", 0.1), ("b", "m1", 0.1)]).to_pandas())
    journal.append(rows([("a", "other", 0.9)]).to_pandas())  # a model not asked for
    journal.append(rows([(t, "m1", 0.3) for t in ("c", "d", "e")]).to_pandas())
    assert list(journal._parts_by_model(["m1", "m2"])) == ["m2", "m1"]
    journal.write_ordered(tmp_path / "f.parquet", ids, ["m1", "m2"])
    meta = pq.ParquetFile(tmp_path / "f.parquet").metadata
    # each model's rows in row groups of 3, its last one shorter: no row group mixes models,
    # as each row group's statistics show
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [3, 2, 3, 2]
    stats = [meta.row_group(i).column(meta.schema.names.index("model")).statistics
             for i in range(meta.num_row_groups)]
    assert [(s.min, s.max) for s in stats] == [("m1", "m1")] * 2 + [("m2", "m2")] * 2
    got = pq.read_table(tmp_path / "f.parquet").to_pandas()
    want = ordered_table(journal.table(), ids, ["m1", "m2"]).to_pandas()
    pd.testing.assert_frame_equal(got, want)
    assert list(got["model"]) == ["m1"] * 5 + ["m2"] * 5
    assert list(got["p_up"]) == [0.1, 0.1, 0.3, 0.3, 0.3] + [0.2] * 5


def test_one_models_rows_are_its_row_groups_or_else_the_rows_filtered(tmp_path, monkeypatch):
    """A model's rows read from its row groups alone (told apart by their statistics) equal
    the rows a filter on every row keeps; a table whose row groups mix models, or that has no
    statistics, is read through the filter, with the same answer."""
    from finbench.runlog import forecast_table

    monkeypatch.setattr(forecast_table, "ROW_GROUP", 3)
    ids = np.array(["a", "b", "c", "d", "e"], object)
    journal = Journal(tmp_path)
    for model, p in (("m2", 0.2), ("m1", 0.1), ("m3", 0.3)):
        journal.append(rows([(t, model, p + i / 100) for i, t in enumerate(ids)]))
    grouped = tmp_path / "f.parquet"
    journal.write_ordered(grouped, ids, ["m1", "m2", "m3"])
    whole = pq.read_table(grouped)
    mixed, bare = tmp_path / "mixed.parquet", tmp_path / "bare.parquet"
    pq.write_table(whole, mixed, row_group_size=4)  # row groups of two models
    pq.write_table(whole, bare, row_group_size=3, write_statistics=False)
    meta = pq.ParquetFile(grouped).metadata
    assert forecast_table.model_row_groups(meta, "m2") == [2, 3]
    assert forecast_table.model_row_groups(meta, "none") == []
    for path in (mixed, bare):
        assert forecast_table.model_row_groups(pq.ParquetFile(path).metadata, "m2") is None
    columns = ["task_id", "model", "p_up", "valid"]
    for path in (grouped, mixed, bare):
        for model in ("m1", "m2", "m3", "none"):
            got = forecast_table.model_rows(path, model, columns)
            want = pq.read_table(path, columns=columns, filters=[("model", "=", model)])
            assert got.equals(want), (path.name, model)
            assert got.column("model").to_pylist() == [model] * (5 if model != "none" else 0)
    assert forecast_table.model_rows(mixed, "m3", ["p_up"]).column("p_up").to_pylist() == [
        0.3 + i / 100 for i in range(5)]


def test_parts_that_overlap_are_ordered_in_memory_and_the_last_write_wins(tmp_path):
    import pyarrow.parquet as pq

    from finbench.runlog.forecast_table import join_tables

    ids = np.array(["a", "b"], object)
    journal = Journal(tmp_path)
    journal.append(rows([("a", "m1", 0.1), ("b", "m1", 0.2)]).to_pandas())
    journal.append(rows([("b", "m1", 0.7)]).to_pandas())  # a resumed run answered b again
    parts = journal._parts_by_model(["m1"])["m1"]
    assert join_tables(tmp_path / "j.parquet", parts, ids, ["m1"]) is False  # b twice
    assert not (tmp_path / "j.parquet").exists() and not (tmp_path / "j.tmp").exists()
    journal.write_ordered(tmp_path / "f.parquet", ids, ["m1"])
    assert pq.read_table(tmp_path / "f.parquet").column("p_up").to_pylist() == [0.1, 0.7]


def _shard_tables(tmp_path, ids, asked, cuts, group, backwards=False):
    """Forecast tables of consecutive runs of ``ids`` (cut at ``cuts``), each written as a
    run writes its own (row groups of ``group`` rows), with the rows of models m1, m2 and
    'other' for the tasks each was ``asked`` (in task order, or ``backwards``); and every
    row, in the order written."""
    from unittest import mock

    from finbench.runlog import forecast_table

    bounds = [0, *cuts, len(ids)]
    paths, tables = [], []
    with mock.patch.object(forecast_table, "ROW_GROUP", group):
        for s, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            pairs = [(t, m, (i + 1) / 100 + s / 1000) for m in ("m1", "m2", "other")
                     for i, t in enumerate(ids[lo:hi], start=lo) if asked[m][i]]
            pairs = sorted(pairs, key=lambda x: (x[1], x[0]), reverse=backwards)
            table = rows(pairs) if pairs else FORECAST_SCHEMA.empty_table()
            paths.append(tmp_path / f"shard{s}.parquet")
            forecast_table.write_forecasts(paths[-1], [table])
            tables.append(table)
    return paths, tables


@settings(max_examples=60)
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(
           st.just(n),
           st.fixed_dictionaries({m: st.lists(st.booleans(), min_size=n, max_size=n)
                                  for m in ("m1", "m2", "other")}),
           st.lists(st.integers(0, n), max_size=3).map(sorted),
           st.integers(1, 4),
           st.sampled_from(["in order", "reversed", "a task twice", "backwards"]))))
def test_joined_shard_tables_hold_what_ordering_them_in_memory_gives(tmp_path_factory, case):
    """``join_tables`` copies each model's row groups of each source in turn: where the
    sources lie in order it always joins them, their row groups as they were; the rows it
    joins are exactly :func:`ordered_table`'s of all the sources' rows; given sources out
    of order or repeating a task it writes nothing rather than a table that lies."""
    from finbench.runlog.forecast_table import join_tables, model_row_groups, ordered_table

    n, asked, cuts, group, how = case
    tmp_path = tmp_path_factory.mktemp("join")
    ids = np.array([f"t{i:02d}" for i in range(n)], object)
    paths, tables = _shard_tables(tmp_path, ids, asked, cuts, group, how == "backwards")
    if how == "reversed":
        paths, tables = paths[::-1], tables[::-1]
    elif how == "a task twice":  # the first shard's rows written again at the end
        paths, tables = [*paths, paths[0]], [*tables, tables[0]]
    out = tmp_path / "joined.parquet"
    joined = join_tables(out, paths, ids, ["m1", "m2"])
    every = pa.concat_tables(tables)
    want = ordered_table(every, ids, ["m1", "m2"])
    lines_up = True  # each model's rows, source after source, are its tasks in order, once
    for model in ("m1", "m2"):
        at = [list(ids).index(t) for t, m in zip(every.column("task_id").to_pylist(),
                                                  every.column("model").to_pylist(),
                                                  strict=True) if m == model]
        lines_up &= all(a < b for a, b in zip(at, at[1:], strict=False))
    assert joined is lines_up
    if how == "in order":
        assert joined
    assert not (tmp_path / "joined.tmp").exists()
    if not joined:
        assert not out.exists()
        return
    got = pq.read_table(out)
    assert got.equals(want.replace_schema_metadata(got.schema.metadata))
    # the sources' row groups, a model at a time, each as its source wrote it
    meta = pq.read_metadata(out)
    sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    expected = []
    for model in ("m1", "m2"):
        for path in paths:
            source = pq.read_metadata(path)
            expected += [source.row_group(g).num_rows
                         for g in model_row_groups(source, model)]
    assert sizes == expected


def test_a_join_refuses_tables_whose_row_groups_mix_models_and_names_a_full_disk(
        tmp_path, monkeypatch):
    """A table with a row group of two models (not written by the forecast table's writer)
    is not joined: the caller orders its rows in memory. Out of space, the join raises
    naming the file and leaves nothing behind."""
    from finbench.core.outputs import DiskFullError
    from finbench.runlog import parquet_join
    from finbench.runlog.forecast_table import encode_rows, join_tables, write_forecasts

    ids = np.array(["a", "b"], object)
    three = rows([("a", "m1", 0.1), ("b", "m1", 0.2), ("a", "m2", 0.3)])
    mixed, foreign = tmp_path / "mixed.parquet", tmp_path / "foreign.parquet"
    encode_rows(three, str(mixed))  # one row group of both models, encoded as the table's
    pq.write_table(three, foreign)  # another writer's schema and metadata
    for source in (mixed, foreign):
        assert join_tables(tmp_path / "j.parquet", [source], ids, ["m1", "m2"]) is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.parquet", "mixed.parquet"]
    good = tmp_path / "good.parquet"
    write_forecasts(good, [three])
    assert join_tables(tmp_path / "j.parquet", [good], ids, ["m1", "m2"]) is True
    assert pq.read_table(tmp_path / "j.parquet").column("p_up").to_pylist() == [0.1, 0.2, 0.3]

    def disk_full(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(parquet_join, "copy_range", disk_full)
    with pytest.raises(DiskFullError, match=r"k.parquet: cannot be written: no space left"):
        join_tables(tmp_path / "k.parquet", [good], ids, ["m1", "m2"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "foreign.parquet", "good.parquet", "j.parquet", "mixed.parquet"]


def test_forecast_files_keep_dictionaries_only_for_columns_whose_values_repeat(tmp_path):
    import pyarrow.parquet as pq

    ids = np.array([f"t{i}" for i in range(50)], object)
    journal = Journal(tmp_path)
    journal.append(rows([(t, "m1", 0.5) for t in ids]))
    journal.write_ordered(tmp_path / "f.parquet", ids, ["m1"])
    for path in (tmp_path / "f.parquet", tmp_path / "journal.parts" / "000000.parquet"):
        chunks = pq.ParquetFile(path).metadata.row_group(0)
        encodings = {chunks.column(i).path_in_schema: chunks.column(i).encodings
                     for i in range(chunks.num_columns)}
        assert "RLE_DICTIONARY" in encodings["model"]
        assert "RLE_DICTIONARY" not in encodings["task_id"]
        assert "RLE_DICTIONARY" not in encodings["input_sha256"]


def test_streamed_answers_are_ordered_one_model_at_a_time(tmp_path, monkeypatch):
    """Answers streamed into journal.jsonl (LLM calls) and parts (baselines): the table equals
    the whole journal ordered at once, yet only one model's rows are ever ordered together,
    and a model whose parts line up is copied part by part."""
    import pyarrow.parquet as pq

    from finbench.runlog import journal as journal_module

    def lines(pairs):
        return rows(pairs).to_pandas().to_dict("records")

    ids = np.array(["a", "b", "c"], object)
    journal = Journal(tmp_path)
    journal.append(rows([("a", "m1", 0.1), ("b", "m1", 0.2)]).to_pandas())
    journal.append(rows([("c", "m1", 0.3)]).to_pandas())
    journal.append(rows([("b", "m3", 0.4)]).to_pandas())
    journal.append_records(lines([("c", "m2", 0.5), ("a", "m2", 0.6), ("x", "other", 0.9)]))
    journal.append_records(lines([("b", "m3", 0.7), ("a", "m2", 0.8), ("b", "m2", 0.55)]))
    with open(tmp_path / "journal.jsonl", "a") as fh:
        fh.write('{"task_id": "c", "model": "m3"')  # torn: a kill mid-write
    want = ordered_table(journal.table(), ids, ["m1", "m2", "m3"]).to_pandas()
    seen, orig = [], journal_module.ordered_table
    monkeypatch.setattr(journal_module, "ordered_table",
                        lambda table, task_ids, models: seen.append(
                            (list(models), table.num_rows)) or orig(table, task_ids, models))
    journal.write_ordered(tmp_path / "f.parquet", ids, ["m1", "m2", "m3"])
    assert seen == [(["m2"], 4), (["m3"], 2)]  # m1's parts lined up: copied as they are
    got = pq.read_table(tmp_path / "f.parquet").to_pandas()
    pd.testing.assert_frame_equal(got, want)
    assert list(zip(got["model"], got["task_id"], got["p_up"], strict=True)) == [
        ("m1", "a", 0.1), ("m1", "b", 0.2), ("m1", "c", 0.3), ("m2", "a", 0.8),
        ("m2", "b", 0.55), ("m2", "c", 0.5), ("m3", "b", 0.7)]


def test_a_journal_line_of_the_wrong_type_names_the_file_and_column(tmp_path):
    journal = Journal(tmp_path)
    journal.append_records(rows([("a", "m1", 0.1)]).to_pandas().to_dict("records"))
    with open(tmp_path / "journal.jsonl", "a") as fh:
        fh.write('{"task_id": "b", "model": "m1", "p_up": "high"}\n')
    with pytest.raises(RunError, match=r"journal\.jsonl: line 2 is not a journal line .*p_up"):
        journal.table()
    with open(tmp_path / "journal.jsonl", "a") as fh:  # an audit or resume: one line, no trace
        fh.write('garbage {\n')
    (tmp_path / "journal.jsonl").write_text((tmp_path / "journal.jsonl").read_text().replace(
        '"p_up": "high"', '"p_up": 0.5'))
    with pytest.raises(RunError, match=r"journal\.jsonl: line 3 is not a journal line"):
        journal.table()


def test_a_long_torn_last_line_is_left_out(tmp_path):
    """The last newline is searched back from the end a block at a time, however far."""
    journal = Journal(tmp_path)
    journal.append_records(rows([("a", "m1", 0.1), ("b", "m1", 0.2)]).to_pandas()
                           .to_dict("records"))
    with open(tmp_path / "journal.jsonl", "a") as fh:
        fh.write('{"task_id": "c", "model": "m1", "raw": "' + "x" * 200_000)  # killed here
    assert journal.table().column("task_id").to_pylist() == ["a", "b"]
    assert journal.done_by_model() == {"m1": ["a", "b"]}
