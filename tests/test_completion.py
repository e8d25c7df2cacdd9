"""What is kept of a chat completion (online and Batch API alike): a 200 body that is no
chat completion is a call without answer, named; content parts are read as their text."""

import json

import pytest

from finbench.forecasters.completion import completion_dict

ANSWER = json.dumps({"p_up": 0.6, "lower": -0.01, "upper": 0.01})


def body(**message) -> dict:
    return {"model": "m-2025", "choices": [{"message": {"content": ANSWER, **message},
                                            "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20}}


def test_a_completion_keeps_its_fields():
    got = completion_dict(body())
    assert got == {"content": ANSWER, "refusal": None, "finish_reason": "stop",
                   "usage": {"prompt_tokens": 100, "completion_tokens": 20},
                   "model": "m-2025", "system_fingerprint": None}


def test_content_parts_are_the_text_of_their_text_parts():
    parts = [{"type": "thinking", "thinking": "up"}, {"type": "text", "text": ANSWER[:10]},
             {"type": "text", "text": ANSWER[10:]}]
    assert completion_dict(body(content=parts))["content"] == ANSWER
    assert completion_dict(body(content=[{"type": "thinking", "thinking": "x"}]))[
        "content"] == ""


@pytest.mark.parametrize(("data", "said"), [
    ("<html>busy</html>", "the answer is no JSON object (a text)"),
    ([1, 2], "the answer is no JSON object (a list)"),
    ({"choices": []}, "response without choices"),
    ({"choices": "x"}, "choices[0] is no object"),
    ({"choices": [{"message": "hi"}]}, "choices[0].message is a text, not an object"),
    ({"choices": [{"message": {"content": 0.6}}]},
     "choices[0].message.content is a number, not text"),
    ({"choices": [{"message": {"content": ["x"]}}]},
     "choices[0].message.content is a list, not text"),
    ({"choices": [{"message": {"content": "x", "refusal": 1}}]},
     "choices[0].message.refusal is a number, not text"),
    ({"choices": [{"message": {"content": "x"}, "finish_reason": ["stop"]}]},
     "choices[0].finish_reason is a list, not text"),
    ({"choices": [{"message": {"content": "x"}, "logprobs": {"content": [
        {"top_logprobs": [{"token": "up"}]}]}}]},
     "the first token's top_logprobs are not objects with a token and a logprob"),
    ({"choices": [{"message": {"content": "x"}, "logprobs": {"content": "x"}}]},
     "choices[0].logprobs.content is no list of objects"),
    ({"choices": [{"message": {"content": "x"}, "logprobs": [{"token": "up"}]}]},
     "choices[0].logprobs is a list, not an object"),
])
def test_a_body_that_is_no_chat_completion_is_a_call_without_answer(data, said):
    assert completion_dict(data) == {"transport_error": f"api_error: {said}"}


def test_usage_that_is_no_count_is_left_out_not_guessed():
    data = body()
    data["usage"] = {"prompt_tokens": "100", "completion_tokens": True,
                     "completion_tokens_details": {"reasoning_tokens": -1}}
    assert completion_dict(data)["usage"] == {"prompt_tokens": None, "completion_tokens": None,
                                              "completion_tokens_details": None}
    data["usage"] = "n/a"
    assert completion_dict(data)["usage"] == {}
