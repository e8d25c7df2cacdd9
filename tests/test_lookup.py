"""Arrow look-ups by text key: positions and takes equal a pandas left join; object arrays of
one repeated value."""

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.core.lookup import positions, repeated, same_values, take


def test_positions_of_present_absent_and_chunked_keys():
    index = pd.Series(["a", "b", "c"])
    keys = pa.chunked_array([["c", "zz"], ["a", "a", "b"]])
    np.testing.assert_array_equal(positions(keys, index), [2, -1, 0, 0, 1])


def test_take_equals_a_left_merge_and_keeps_dtypes():
    source = pd.DataFrame({"k": ["a", "b"], "r": [0.5, -1.0],
                           "y": pd.array([1, pd.NA], dtype="Int8"), "s": ["ok", "no"]})
    keys = pd.Series(["b", "x", "a"])
    at = positions(keys, source["k"])
    got = pd.DataFrame({"k": keys, **{c: take(source[c], at) for c in ("r", "y", "s")}})
    want = pd.DataFrame({"k": keys}).merge(source, on="k", how="left")
    pd.testing.assert_frame_equal(got, want)


def test_repeated_holds_one_object_n_times_without_making_more():
    import sys

    text = "not_" + "applicable"  # made here, so its identity is known
    before = sys.getallocatedblocks()
    out = repeated(text, 100_000)
    assert sys.getallocatedblocks() - before < 100  # np.full would make 100,000 texts
    assert out.dtype == object and len(out) == 100_000
    assert all(v is text for v in out[[0, 1, 99_999]])
    assert len(repeated(None, 0)) == 0


def test_same_values_a_missing_one_matching_only_a_missing_one():
    """How the audit compares digests and other text cells."""
    stored = pa.array(["a" * 64, "b" * 64, None, None, "c" * 64])
    derived = pa.array(["a" * 64, "a" * 64, None, "d" * 64, None])
    np.testing.assert_array_equal(same_values(stored, derived), [True, False, True, False, False])


@settings(max_examples=200)
@given(st.lists(st.sampled_from(["a", "b", "c", "dd"]), min_size=0, max_size=6, unique=True),
       st.integers(0, 4), st.booleans())
def test_copies_of_and_repeated_columns_equal_the_look_up_and_take(index, copies, spoil):
    """Keys that are the index laid end to end ``copies`` times are found to be so, and the
    columns laid end to end equal :func:`take` at the looked-up rows (values, dtypes); keys
    that are not (one key changed) are found not to be."""
    from finbench.core.lookup import arrow_text, copies_of, repeated_column

    keys = index * copies
    if spoil and keys:
        keys = keys[:-1] + ["zz"]
    found = copies_of(arrow_text(keys), arrow_text(index))
    if spoil and keys or not index or not copies:
        assert found == 0
        return
    assert found == copies
    source = pd.DataFrame({"r": np.linspace(-1, 1, len(index)),
                           "y": pd.array([1, None, 0, 1][:len(index)], dtype="Int8"),
                           "s": pd.Series(["ok", "no", "ok", "x"][:len(index)], dtype="str")})
    at = positions(pd.Series(keys), pd.Series(index))
    for column in source:
        pd.testing.assert_series_equal(repeated_column(source[column], found),
                                       take(source[column], at), check_names=False)


@settings(max_examples=200)
@given(st.lists(st.one_of(st.integers(-3, 12), st.sampled_from([2**15, 2**15 + 3, 2**16 + 1,
                                                                -(2**15) - 1, 2**40])),
                max_size=200),
       st.integers(0, 12), st.sampled_from(["int64", "int32", "int16", "int8"]))
def test_groups_hold_each_codes_rows_in_row_order(codes, n, kind):
    """Each group is the rows holding its code, in row order; codes outside 0 .. n-1 (some
    that a narrower integer would wrap into a group) belong to none."""
    from finbench.core.lookup import groups

    code = np.array(codes, np.int64)
    if kind != "int64":
        info = np.iinfo(kind)
        code = code[(code >= info.min) & (code <= info.max)].astype(kind)
    got = groups(code, n)
    assert len(got) == n
    for i, rows in enumerate(got):
        np.testing.assert_array_equal(rows, np.flatnonzero(code == i))
