"""Float columns formatted for CSV a column at a time are what pandas' float_format writes."""

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.core.outputs import formatted_floats


@settings(max_examples=200)
@given(st.lists(st.tuples(st.floats(allow_nan=True, allow_infinity=True, width=64),
                          st.one_of(st.none(), st.text(max_size=5)), st.integers(-10, 10)),
                min_size=1, max_size=30),
       st.sampled_from(["%.12g", "%.10g", "%.3f"]))
def test_formatted_floats_write_the_csv_pandas_writes(rows, fmt):
    frame = pd.DataFrame({"f": [r[0] for r in rows], "s": pd.Series([r[1] for r in rows],
                                                                    dtype=object),
                          "i": [r[2] for r in rows], "g": np.array([r[0] for r in rows]) / 3})
    assert formatted_floats(frame, fmt).to_csv(index=False) == frame.to_csv(
        index=False, float_format=fmt)


def test_nullable_floats_and_frames_without_floats_are_left_as_they_are():
    frame = pd.DataFrame({"f": pd.array([0.5, None], dtype="Float64"), "n": [1, 2]})
    assert formatted_floats(frame, "%.12g").to_csv(index=False) == frame.to_csv(
        index=False, float_format="%.12g")
    assert formatted_floats(frame[["n"]], "%.12g").equals(frame[["n"]])
