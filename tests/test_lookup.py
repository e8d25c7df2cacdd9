"""Arrow look-ups by text key: positions and takes equal a pandas left join; object arrays of
one repeated value."""

import numpy as np
import pandas as pd
import pyarrow as pa

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
