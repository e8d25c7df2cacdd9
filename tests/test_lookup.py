"""Arrow look-ups by text key: positions and takes equal a pandas left join."""

import numpy as np
import pandas as pd
import pyarrow as pa

from finbench.core.lookup import positions, take


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
