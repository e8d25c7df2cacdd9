import pytest

from finbench.forecast import parse_answer


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
