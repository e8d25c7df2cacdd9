"""Column-wise JSON objects: exact text, round-trip numbers, nulls."""

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from finbench.core.jsontext import json_array


def json_lines(columns, n) -> list[str]:
    return json_array(columns, n).to_pylist()


def test_hand_written_objects():
    out = json_lines({"p": np.array([0.5, np.nan, 0.1 + 0.2]),
                      "fallback": np.array([None, "base_rate", 'say "hi"'], object),
                      "n": np.array([1, 2, 3]), "ok": np.array([True, False, True]),
                      "sign": pd.array([1, pd.NA, -1], dtype="Int64")}, 3)
    assert list(out) == [
        '{"fallback":null,"n":1,"ok":true,"p":0.5,"sign":1}',
        '{"fallback":"base_rate","n":2,"ok":false,"p":null,"sign":null}',
        '{"fallback":"say \\"hi\\"","n":3,"ok":true,"p":0.30000000000000004,"sign":-1}',
    ]


def test_scalars_and_columns_of_one_value_are_written_alike():
    out = json_lines({"p": 0.5, "n": np.full(3, 7), "s": "x", "none": None,
                      "z": np.array([0.0, -0.0, 0.0])}, 3)
    assert list(out) == ['{"n":7,"none":null,"p":0.5,"s":"x","z":0}',
                         '{"n":7,"none":null,"p":0.5,"s":"x","z":-0}',
                         '{"n":7,"none":null,"p":0.5,"s":"x","z":0}']
    assert list(json_lines({"z": np.full(2, -0.0)}, 2)) == ['{"z":-0}'] * 2
    assert list(json_lines({"p": 0.5, "ok": np.full(2, True)}, 2)) == [
        '{"ok":true,"p":0.5}'] * 2  # every column one value: still one object per row


_FEW = st.sampled_from([0.0, -0.0, 0.5, 1e-300, float("nan"), float("inf")])


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True) | _FEW, min_size=1,
                max_size=20) | st.builds(lambda v, n: [v] * n, _FEW, st.integers(1, 5)))
def test_numbers_round_trip_and_non_finite_is_null(values):
    out = json_lines({"x": np.array(values, float)}, len(values))
    assert len(out) == len(values)
    for text, v in zip(out, values, strict=True):
        got = json.loads(text)["x"]
        assert got is None if not np.isfinite(v) else got == v
    if all(np.isfinite(values)):  # a column of one value reads as each value on its own
        assert list(out) == [json_lines({"x": np.array([v])}, 1)[0] for v in values]


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True) | _FEW, min_size=1,
                max_size=40), st.randoms(use_true_random=False))
def test_a_long_column_of_repeated_numbers_reads_as_its_values_written_apart(pool, rnd):
    """Past 1,024 rows a float column's repeated values are cast once each (through Arrow's
    dictionary): the texts are those of the values cast one by one, -0.0 keeping its own."""
    values = np.array([rnd.choice(pool) for _ in range(1500)], float)
    apart = [line for i in range(0, 1500, 100) for line in json_lines({"x": values[i:i + 100]},
                                                                      len(values[i:i + 100]))]
    assert json_lines({"x": values}, 1500) == apart


def test_length_mismatch_is_an_error():
    import pytest

    with pytest.raises(ValueError, match="2 values for 3 rows"):
        json_lines({"x": np.array([1.0, 2.0])}, 3)


def test_fields_made_once_close_several_objects_as_if_written_with_them():
    from finbench.core.jsontext import json_fields

    tail = json_fields({"window_last": np.array(["2025-01-14", None], object),
                        "skipped": np.array([0, 3])}, 2)
    assert tail.keys == ("skipped", "window_last")
    assert tail.text.to_pylist() == ['"skipped":0,"window_last":"2025-01-14"',
                                     '"skipped":3,"window_last":null']
    own = {"p": np.array([0.5, 0.25]), "rate_count": np.array([4, 8])}
    assert json_array(own, 2, tail).to_pylist() == json_array(
        {**own, "skipped": np.array([0, 3]),
         "window_last": np.array(["2025-01-14", None], object)}, 2).to_pylist()
    assert json_array({}, 2, tail).to_pylist() == [
        '{"skipped":0,"window_last":"2025-01-14"}', '{"skipped":3,"window_last":null}']
    with pytest.raises(ValueError, match="do not all sort after"):
        json_array({"z": np.array([1, 2])}, 2, tail)


def test_dictionary_encoded_text_is_written_as_the_same_text_given_plain():
    """Codes and their texts (a dictionary array, missing codes among them) give the JSON the
    texts themselves give, quotes escaped; a dictionary of the wrong length is an error."""
    import pyarrow as pa

    plain = np.array([None, 'say "hi"', "2024-01-02", 'say "hi"'], object)
    coded = pa.array(list(plain)).dictionary_encode()
    assert json_lines({"s": coded, "n": np.arange(4)}, 4) == json_lines(
        {"s": plain, "n": np.arange(4)}, 4)
    assert json_lines({"s": coded}, 4)[1] == '{"s":"say \\"hi\\""}'
    with pytest.raises(ValueError, match="column of 4 values for 5 rows"):
        json_array({"s": coded}, 5)


_FLOATS = st.sampled_from([0.0, -0.0, 0.5, 0.1 + 0.2, 1e-300, float("nan"), float("inf"),
                           -float("inf")])
_TEXTS = st.sampled_from([None, "", "2024-01-02", 'say "hi"', "é"])


@given(st.integers(0, 2**32 - 1), st.integers(1024, 2100),
       st.lists(_FLOATS, min_size=1, max_size=6), st.lists(_TEXTS, min_size=1, max_size=4),
       st.booleans())
def test_repeated_rows_are_written_once_each_as_if_written_apart(seed, n, floats, texts,
                                                                  with_tail):
    """From 1,024 rows, rows repeating in every column are written once per distinct row and
    picked (_distinct_rows); each row's text is the one it has when written among a few rows
    (the row-by-row join), whatever the column kinds: floats as bits (0.0 and -0.0 apart,
    NaN and infinities null), integers, booleans, nullable integers, texts with missing
    values, plain and dictionary-encoded; a tail of fields made once closes them alike."""
    import pyarrow as pa

    from finbench.core import jsontext
    from finbench.core.jsontext import json_fields

    rng = np.random.default_rng(seed)

    def pick(pool):
        return [pool[k] for k in rng.integers(len(pool), size=n)]

    text = pick(texts)
    columns = {"f": np.array(pick(floats)), "i": np.array(pick([-3, 2**40])),
               "b": np.array(pick([True, False])),  # at most 2 x 2 x 2 x 6 x 4 rows distinct
               "m": pd.array(pick([-1, None]), dtype="Int64"),
               "s": pd.Series(text, dtype=object),
               "t": pa.array(text).dictionary_encode()}
    tail_columns = {"w_first": pa.array(pick(texts)).dictionary_encode(),
                    "w_skipped": np.array(pick([0, 1, 5]))}
    assert jsontext._distinct_rows(columns, n) is not None  # the path under test is taken
    tail = json_fields(tail_columns, n) if with_tail else None
    got = json_array(columns, n, tail).to_pylist()

    def apart(values, rows):
        if isinstance(values, pa.Array):
            return values.slice(rows.start, rows.stop - rows.start)
        return values[rows] if not isinstance(values, pd.Series) else values.iloc[rows]

    want = []
    for start in range(0, n, 500):  # under 1,024 rows: written row by row
        rows = slice(start, min(start + 500, n))
        part = {k: apart(v, rows) for k, v in columns.items()}
        size = rows.stop - rows.start
        if with_tail:
            part.update({k: apart(v, rows) for k, v in tail_columns.items()})
        want += json_array(part, size).to_pylist()
    assert got == want
    if with_tail:
        fields = json_fields(tail_columns, n).text
        assert isinstance(fields, pa.DictionaryArray)
        assert pa.concat_arrays([json_fields({k: apart(v, slice(s, min(s + 500, n)))
                                              for k, v in tail_columns.items()},
                                             min(s + 500, n) - s).text
                                 for s in range(0, n, 500)]).to_pylist() == (
            fields.dictionary.take(fields.indices).to_pylist())


def test_rows_apart_or_unsuited_columns_are_joined_row_by_row():
    """Interval bounds (floats that hardly repeat, missing where the model abstains), values
    of several Python kinds (True and 1 must not share a text), and rows mostly distinct are
    joined row by row, with the same texts."""
    from finbench.core import jsontext

    n = 2000
    rng = np.random.default_rng(4)
    bounds = np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n))
    mixed = np.array([True, 1, 1.0, "1", None] * (n // 5), object)
    distinct = np.arange(n) % 1000
    for columns in ({"lower": bounds, "p": np.full(n, 0.5) + (np.arange(n) % 3)},
                    {"x": mixed, "n": np.arange(n) % 2}, {"k": distinct}):
        assert jsontext._distinct_rows(columns, n) is None
    got = json_lines({"x": mixed, "n": np.arange(n) % 2}, n)
    assert got[:5] == ['{"n":0,"x":true}', '{"n":1,"x":1}', '{"n":0,"x":1.0}',
                       '{"n":1,"x":"1"}', '{"n":0,"x":null}']
