"""Parquet files joined by copying their row groups' bytes (finbench.runlog.parquet_join):
checked against what Arrow reads back, never against the joiner's own idea of the file."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.runlog.parquet_join import (
    JoinError,
    RowGroupJoiner,
    Struct,
    decode_footer,
    encode_footer,
)

SCHEMA = pa.schema([("id", pa.string()), ("x", pa.float64()), ("n", pa.int64()),
                    ("ok", pa.bool_()), ("at", pa.timestamp("ns", tz="UTC")),
                    ("note", pa.string())])


def encoded(table: pa.Table, **options) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **({"compression": "zstd"} | options))
    return sink.getvalue().to_pybytes()


def template() -> bytes:
    sink = pa.BufferOutputStream()
    pq.ParquetWriter(sink, SCHEMA, compression="zstd").close()
    return sink.getvalue().to_pybytes()


def rows(start: int, n: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed + start)
    x = rng.normal(size=n)
    x[rng.random(n) < 0.2] = np.nan
    notes = np.array(["a", "bb", None, "ccc"], object)[rng.integers(0, 4, n)]
    return pa.table({
        "id": [f"t{start + i}" for i in range(n)], "x": x,
        "n": rng.integers(-(2**62), 2**62, n), "ok": rng.random(n) < 0.5,
        "at": pa.array(rng.integers(0, 2**62, n), pa.int64()).cast(SCHEMA.field("at").type),
        "note": pa.array(notes, pa.string())}, schema=SCHEMA)


def same(got: pa.Table, want: pa.Table) -> bool:
    """Equal tables, NaN equal to NaN (Arrow's ``equals`` holds NaN unequal to itself)."""
    return got.schema.equals(want.schema) and got.to_pandas().equals(want.to_pandas())


def footer(data: bytes) -> bytes:
    (length,) = struct.unpack("<I", data[-8:-4])
    return data[-8 - length:-8]


def test_a_footer_decoded_and_encoded_again_is_the_same_bytes():
    for data in (encoded(rows(0, 50)), encoded(rows(0, 5000), row_group_size=700),
                 template()):
        assert encode_footer(decode_footer(footer(data))) == footer(data)


def test_the_codec_writes_what_the_compact_protocol_says():
    # field 1 (i32 -3: zigzag 5), field 20 (a jump past 15: long form), a bool field, a list
    # of 16 bytes (long list header), a nested struct, and the stop byte of each struct
    s = Struct([[1, 5, -3], [20, 8, b"hi"], [21, 1, True], [22, 9, (3, list(range(16)))],
                [23, 12, Struct([[1, 6, 2**40]])]])
    data = encode_footer(s)
    assert data[:2] == bytes([0x15, 5])
    assert data[2:6] == bytes([0x08, 40, 2]) + b"h"
    assert decode_footer(data).fields[:4] == s.fields[:4]
    assert decode_footer(data).get(23).get(1) == 2**40
    with pytest.raises(JoinError, match="after its end"):
        decode_footer(data + b"\x00")
    with pytest.raises(JoinError, match="ends inside"):
        decode_footer(data[:-3])


def test_joined_files_read_back_as_their_rows_one_after_the_other(tmp_path):
    pieces = [rows(0, 300), rows(300, 1), rows(301, 4000), rows(4301, 17)]
    files = [encoded(p, row_group_size=1000) for p in pieces]
    joiner = RowGroupJoiner(tmp_path / "j.parquet", template())
    for data in files:
        joiner.add(data)
    joiner.close()
    got = pq.ParquetFile(tmp_path / "j.parquet")
    assert same(got.read(), pa.concat_tables(pieces))
    # every row group as its file had it, statistics included
    groups = [pq.ParquetFile(pa.BufferReader(d)).metadata for d in files]
    want = [(m.row_group(g).num_rows, m.row_group(g).column(1).statistics)
            for m in groups for g in range(m.num_row_groups)]
    meta = got.metadata
    assert [(meta.row_group(g).num_rows, meta.row_group(g).column(1).statistics)
            for g in range(meta.num_row_groups)] == want
    assert same(got.read_row_group(1), pieces[1])
    filtered = pq.read_table(tmp_path / "j.parquet", filters=[("id", "=", "t300")])
    assert filtered.column("id").to_pylist() == ["t300"]


@settings(max_examples=40)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=20), st.integers(1, 30))
def test_any_split_joins_back_to_the_whole(tmp_path_factory, sizes, group):
    tmp = tmp_path_factory.mktemp("join")
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    pieces = [rows(int(a), n, seed=7) for a, n in zip(starts, sizes, strict=True)]
    joiner = RowGroupJoiner(tmp / "j.parquet", template())
    for piece in pieces:
        joiner.add(encoded(piece, row_group_size=group))
    joiner.close()
    got = pq.ParquetFile(tmp / "j.parquet")
    assert same(got.read(), pa.concat_tables(pieces))
    assert got.metadata.num_rows == sum(sizes)
    assert got.metadata.num_row_groups == sum(-(-n // group) for n in sizes if n) + sum(
        1 for n in sizes if n == 0)  # Arrow writes an empty table as one empty row group


def test_one_file_joined_alone_is_that_file(tmp_path):
    data = encoded(rows(0, 2500), row_group_size=1000)
    joiner = RowGroupJoiner(tmp_path / "j.parquet", template())
    joiner.add(data)
    joiner.close()
    assert (tmp_path / "j.parquet").read_bytes() == data
    empty = RowGroupJoiner(tmp_path / "e.parquet", template())
    empty.close()  # no file added: the template's schema, no row group
    assert (tmp_path / "e.parquet").read_bytes() == template()
    assert pq.read_table(tmp_path / "e.parquet").schema.equals(SCHEMA)


def test_a_joined_file_is_fsynced_unless_its_caller_syncs_it_later(tmp_path, monkeypatch):
    import finbench.runlog.parquet_join as join_module

    synced = []
    monkeypatch.setattr(join_module.os, "fsync", synced.append)
    data = encoded(rows(0, 10))
    for name, kept in (("a.parquet", True), ("b.parquet", False)):
        joiner = RowGroupJoiner(tmp_path / name, template())
        joiner.add(data)
        joiner.close(synced=kept)
        assert (tmp_path / name).read_bytes() == data  # the same bytes either way
    assert len(synced) == 1


def test_files_it_cannot_join_exactly_are_refused(tmp_path):
    good = encoded(rows(0, 100))
    joiner = RowGroupJoiner(tmp_path / "j.parquet", template())
    other = rows(0, 100).rename_columns(["id", "x", "n", "ok", "at", "other"])
    cases = {
        "differ from the template": encoded(other),
        "page index": encoded(rows(0, 100), write_page_index=True),
        "not a Parquet file": b"PAR1 torn",
        "not a Parquet file ": good[:-1],
        "past the file's start": good[:4] + good[-8:],
        "differ from the template ": encoded(
            rows(0, 100).replace_schema_metadata({"pandas": "{}"})),
    }
    for what, data in cases.items():
        with pytest.raises(JoinError, match=what.strip()):
            joiner.add(data, "f")
    joiner.add(good)  # nothing refused was written
    joiner.close()
    assert same(pq.read_table(tmp_path / "j.parquet"), rows(0, 100))


@pytest.mark.parametrize("how", ["system", "read and written"])
def test_files_on_disk_join_to_the_same_bytes_as_files_given_as_bytes(tmp_path, monkeypatch, how):
    """Files added by path are checked from their footers and copied by the system
    (copy_file_range), or read and written where it cannot copy: the same bytes either way,
    bytes added in between land after them."""
    import errno
    import os

    if how != "system":
        def cannot(*args):
            raise OSError(errno.EXDEV, "cross-device")
        monkeypatch.setattr(os, "copy_file_range", cannot, raising=False)
    pieces = [rows(0, 300), rows(300, 1), rows(301, 4000), rows(4301, 17)]
    files = [encoded(p, row_group_size=1000) for p in pieces]
    paths = []
    for i, data in enumerate(files):
        paths.append(tmp_path / f"part{i}.parquet")
        paths[-1].write_bytes(data)
    by_bytes = RowGroupJoiner(tmp_path / "bytes.parquet", template())
    by_path = RowGroupJoiner(tmp_path / "paths.parquet", template())
    for i, (data, path) in enumerate(zip(files, paths, strict=True)):
        by_bytes.add(data)
        if i == 1:
            by_path.add(data)  # given as bytes between files given by path
        else:
            by_path.add_file(path)
    by_bytes.close()
    by_path.close()
    assert (tmp_path / "paths.parquet").read_bytes() == (tmp_path / "bytes.parquet").read_bytes()
    assert same(pq.read_table(tmp_path / "paths.parquet"), pa.concat_tables(pieces))
    # checked from its footer as a whole file would be
    (tmp_path / "torn.parquet").write_bytes(files[0][:-1])
    with pytest.raises(JoinError, match="torn.parquet: not a Parquet file"):
        by_bytes.check(tmp_path / "torn.parquet")


@settings(max_examples=60)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=6), st.randoms(use_true_random=False),
       st.sampled_from(["none", "flip", "missing", "twice", "re-encoded", "two groups",
                        "other file"]))
def test_a_file_is_known_as_files_joined_only_when_it_is(tmp_path_factory, sizes, rng, change):
    """``row_groups_are_files``: a file joined from one-row-group files (in any order) is
    known as them; one byte changed, a file left out or joined twice, the same rows encoded
    again, a file of two row groups, or a file not among those joined is not."""
    from finbench.runlog.parquet_join import row_groups_are_files

    tmp = tmp_path_factory.mktemp("known")
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    files = []
    for k, (a, n) in enumerate(zip(starts, sizes, strict=True)):
        files.append(tmp / f"{k}.parquet")
        files[-1].write_bytes(encoded(rows(int(a), n, seed=3)))
    order = list(files)
    rng.shuffle(order)
    joined = order + [order[0]] if change == "twice" else (
        order[1:] if change == "missing" and len(order) > 1 else order)
    joiner = RowGroupJoiner(tmp / "j.parquet", template())
    for f in joined:
        joiner.add(f.read_bytes())
    joiner.close()
    target, given_files = tmp / "j.parquet", list(files)
    if change == "flip":  # one byte of the rows' bytes (after the magic, before the footer)
        data = bytearray(target.read_bytes())
        at = 4 + rng.randrange(len(data) - 8 - len(footer(bytes(data))) - 4)
        data[at] ^= 0x01
        target.write_bytes(bytes(data))
    elif change == "re-encoded":  # the same rows, written by Arrow again
        target.write_bytes(encoded(pq.read_table(target)))
    elif change == "two groups":
        given_files[0].write_bytes(encoded(pq.read_table(given_files[0]), row_group_size=1))
    elif change == "other file":
        given_files[0].write_bytes(encoded(rows(999, sizes[0], seed=4)))
    exact = change == "none" or (change == "missing" and len(files) == 1) or (
        change == "two groups" and sizes[0] == 1) or (
        change == "re-encoded" and len(files) == 1)
    assert row_groups_are_files(target, given_files) == exact
