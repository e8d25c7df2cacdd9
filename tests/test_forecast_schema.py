import pytest

from finbench.forecasters.answers import parse_answer, parse_class_answer, parse_event_answer


def test_valid_answer_keeps_rationale():
    a = parse_answer('{"p_up": 0.6, "lower": -0.01, "upper": 0.02, "rationale": "drift"}')
    assert a.valid and a.p_up == 0.6 and a.rationale == "drift"


@pytest.mark.parametrize(("raw", "reason"), [
    ('{"p_up": NaN, "lower": 0, "upper": 1}', "finite"),
    ('{"p_up": 0.5, "lower": -Infinity, "upper": 1}', "finite"),
    ('{"p_up": 0.5, "lower": 0, "upper": Infinity}', "finite"),
    ('{"p_up": 1.3, "lower": 0, "upper": 1}', "less than or equal to 1"),
    ('{"p_up": -0.1, "lower": 0, "upper": 1}', "greater than or equal to 0"),
    ('{"p_up": 0.5, "lower": 0.2, "upper": 0.1}', "lower 0.2 is above upper 0.1"),
    ('{"p_up": 0.5, "lower": 0, "upper": 1, "confidence": 9}', "confidence: extra field"),
    ('{"p_up": 0.5, "lower": 0}', "upper: missing"),
    ('{"p_up": "0.5", "lower": 0, "upper": 1}', "valid number"),
    ("I think it goes up", "not_json"),
    ("[0.5, 0, 1]", "expected a JSON object"),
])
def test_bad_answers_are_invalid_with_a_reason_and_raw_text_kept(raw, reason):
    a = parse_answer(raw)
    assert not a.valid and reason in a.error and a.raw == raw


def test_array_validation_agrees_with_the_schema_row_by_row():
    import json

    import numpy as np
    import pandas as pd

    from finbench.forecasters.base import validate_arrays

    inf, nan = float("inf"), float("nan")
    rows = [(0.5, -0.01, 0.01), (1.3, 0, 1), (-0.1, 0, 1), (nan, 0, 1), (0.5, -inf, 0),
            (0.5, 0, inf), (0.5, 0.2, 0.1), (0.0, 0.0, 0.0), (1.0, -1, 1), (0.5, nan, nan)]
    frame = pd.DataFrame(rows, columns=["p_up", "lower", "upper"])
    got = _frame(validate_arrays(frame))
    want = [parse_answer(json.dumps(dict(zip(("p_up", "lower", "upper"), r, strict=True))))
            for r in rows]
    assert list(got["valid"]) == [w.valid for w in want]
    ok = got["valid"].to_numpy()
    np.testing.assert_array_equal(got.loc[ok, "p_up"], [w.p_up for w in want if w.valid])
    assert got.loc[~ok, "error"].str.startswith("schema:").all()
    refused = _frame(validate_arrays(frame.head(1).assign(refused="insufficient_history: 3 < 20")))
    assert not refused["valid"].iloc[0] and refused["error"].iloc[0].startswith("insufficient")


def test_interval_notes_as_arrow_text_or_python_texts_validate_alike():
    """A baseline hands its interval notes as Arrow text (no Python object per row); a note
    makes a row's interval absent (given anyway: invalid), missing means none, and the
    notes of invalid rows are dropped, as with notes given as Python texts (None, NaN)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from finbench.forecasters.base import validate_arrays

    nan = float("nan")
    frame = pd.DataFrame({"p_up": [0.5, 0.4, 0.3, 1.5, 0.2],
                          "lower": [nan, -0.01, nan, nan, 0.01],
                          "upper": [nan, 0.02, nan, nan, 0.02]})
    texts = ["not_applicable", None, "insufficient_history: 3", "not_applicable",
             "not_applicable"]
    python = validate_arrays(frame.assign(interval_note=np.array(
        [nan if t is None else t for t in texts], object)))
    arrow = validate_arrays(frame.assign(interval_note=pa.array(texts, pa.string())))
    for got in (python, arrow):
        assert list(got["valid"]) == [True, True, True, False, False]
        assert got["interval_note"].to_pylist() == texts[:3] + [None, None]
        assert got["error"][4] == "schema: an interval is given with interval_note set"
        assert got["raw"].to_pylist()[:2] == ['{"p_up":0.5}',
                                              '{"lower":-0.01,"p_up":0.4,"upper":0.02}']


def _frame(columns: dict):
    import pandas as pd
    import pyarrow as pa

    return pd.DataFrame({k: v.to_pylist() if isinstance(v, pa.Array) else v
                         for k, v in columns.items()})


def test_an_integer_past_the_float_range_is_invalid_not_raised():
    """JSON allows any integer; ``float()`` of one with 400 digits raised OverflowError, which
    ended the run that read it (and every rerun: the answer is cached)."""
    huge = "1" + "0" * 400
    a = parse_answer(f'{{"p_up": 0.5, "lower": -{huge}, "upper": 0.01}}')
    assert not a.valid and a.error.startswith("schema: lower: beyond the float range (given -1000")
    assert a.error.endswith("... (402 characters))") and len(a.error) < 120
    assert parse_event_answer(f'{{"p_yes": {huge}}}').error.startswith("schema: p_yes:")
    ok = parse_answer('{"p_up": 1, "lower": -1, "upper": 9007199254740993}')
    assert ok.valid and (ok.p_up, ok.lower, ok.upper) == (1.0, -1.0, 2.0 ** 53)
    assert all(type(v) is float for v in (ok.p_up, ok.lower, ok.upper))


@pytest.mark.parametrize("raw", [
    '{"p_up": 0.9, "lower": -0.01, "upper": 0.01, "p_up": 0.2}',
    '{"p_up": 0.5, "lower": -0.01, "upper": 0.01, "lower": -0.01}',
])
def test_a_field_named_twice_is_invalid_whichever_value_it_repeats(raw):
    """Python's parser kept the last value, another keeps the first: the answer is not read
    one way."""
    a = parse_answer(raw)
    assert not a.valid and a.raw == raw
    assert a.error in ("schema: p_up: given twice", "schema: lower: given twice")
    c = parse_class_answer('{"p_down": 0.2, "p_flat": 0.3, "p_up": 0.5, "p_flat": 0.3}',
                           tolerance=1e-3)
    assert c.error == "schema: p_flat: given twice"
