"""A real HTTP server on 127.0.0.1 that speaks ``/v1/chat/completions`` for tests.

The request's ``model`` names a scripted behaviour; the server counts requests per
(model, prompt) so tests can assert retries happened, and no more.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VALID = {"p_up": 0.6, "lower": -0.01, "upper": 0.012, "rationale": None}
CONTENT = {
    "valid": json.dumps(VALID),
    "classes": json.dumps({"p_down": 0.2, "p_flat": 0.3, "p_up": 0.5, "rationale": None}),
    "classes-bad-sum": json.dumps({"p_down": 0.2, "p_flat": 0.3, "p_up": 0.4,
                                   "rationale": None}),
    "p13": json.dumps({**VALID, "p_up": 1.3}),
    "inverted": json.dumps({**VALID, "lower": 0.02, "upper": -0.02}),
    "nan": '{"p_up": NaN, "lower": -0.01, "upper": 0.01, "rationale": null}',
    "extra": json.dumps({**VALID, "confidence": "high"}),
    "notjson": "I think the stock will probably go up a little today.",
    "hugeint": '{"p_up": 0.6, "lower": -1' + "0" * 400 + ', "upper": 0.01, "rationale": null}',
    "twice": '{"p_up": 0.9, "lower": -0.01, "upper": 0.01, "p_up": 0.2, "rationale": null}',
    "prose": 'Sure! Here is my forecast: {"p_up": 0.55, "lower": -0.02, "upper": 0.02} Good luck.',
}


# 200 answers that are no chat completion (a proxy's page, a provider's bug)
MALFORMED = {
    "notobject": [1, 2],
    "badchoice": {"choices": ["x"]},
    "badmessage": {"choices": [{"message": "hi", "finish_reason": "stop"}]},
    "badusage": {"choices": [{"message": {"content": json.dumps(VALID)},
                              "finish_reason": "stop"}], "usage": "n/a"},
    "numbercontent": {"choices": [{"message": {"content": 0.6}, "finish_reason": "stop"}]},
    "html": b"<html><body>Service temporarily unavailable</body></html>",  # a proxy's page
}


# OpenAI's reasoning models: max_tokens and a temperature other than the default are refused
REASONING = re.compile(r"^(o\d|gpt-5)")
SNAPSHOT = "-2025-04-16"  # what a reasoning model id is served as (a dated snapshot)
UNSUPPORTED = {
    "max_tokens": ("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                   "'max_completion_tokens' instead.", "unsupported_parameter"),
    "temperature": ("Unsupported value: 'temperature' does not support {value} with this "
                    "model. Only the default (1) value is supported.", "unsupported_value"),
}


def _strict(body: dict) -> tuple[int, str]:
    """A server that honours strict schemas: the answer follows it."""
    return 200, CONTENT["valid"]


def _deepseek(body: dict) -> tuple[int, object]:
    """JSON mode only; JSON mode needs the word "json" in the prompt."""
    kind = (body.get("response_format") or {}).get("type")
    if kind == "json_schema":
        return 400, {"error": {"message": "This response_format type is unavailable now",
                               "type": "invalid_request_error"}}
    if kind == "json_object" and not any("json" in m["content"].lower()
                                         for m in body["messages"]):
        return 400, {"error": {"message": "Prompt must contain the word 'json' in some form "
                                          "to use 'response_format' of type 'json_object'.",
                               "type": "invalid_request_error"}}
    return 200, CONTENT["valid"]


def _anthropic(body: dict) -> tuple[int, str]:
    """response_format is ignored: the model writes prose around its JSON object."""
    return 200, CONTENT["prose"]


PROVIDERS = {"vllm": _strict, "ollama": _strict, "together": _strict, "gemini": _strict,
             "deepseek": _deepseek, "anthropic": _anthropic}


REJECTED = {
    "unauthorized": (401, "Incorrect API key provided: sk-****. You can find your API key at "
                          "https://platform.openai.com/account/api-keys.", "invalid_request_error"),
    "forbidden": (403, "You are not allowed to use this model.", "permission_error"),
    "nomodel": (404, "The model `nomodel` does not exist or you do not have access to it.",
                "invalid_request_error"),
}


class ChatServer:
    def __init__(self, delay: float = 0.0, hang_seconds: float = 3.0) -> None:
        self.counts: Counter = Counter()
        self.delay = delay
        self.hang_seconds = hang_seconds
        self.healed = False  # True: "drop20" answers every prompt
        # a recall probe's question -> the outcome the server "remembers" (p_yes 0.95 or
        # 0.05); a question it does not hold is answered 0.5 ("I do not remember")
        self.recall: dict[str, int] = {}
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.in_flight = self.most_in_flight = 0  # chat requests being answered at once
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.batch_calls: Counter = Counter()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(length)
                if self.path.endswith("/files"):
                    return server.upload(self, raw)
                body = json.loads(raw)
                if self.path.endswith("/v1/completions"):
                    return server.complete(self, body)
                if self.path.endswith("/batches"):
                    return server.create_batch(self, body)
                server.handle(self, body)

            def do_GET(self):
                server.get(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def handle(self, h: BaseHTTPRequestHandler, body: dict) -> None:
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            self._handle(h, body)
        finally:
            with self.lock:
                self.in_flight -= 1

    def _handle(self, h: BaseHTTPRequestHandler, body: dict) -> None:
        profile = h.path.strip("/").split("/")[0]
        if profile in PROVIDERS:
            return self._as_provider(h, profile, body)
        model = body["model"]
        # The same canonical hash FinBench stores as input_sha256, so tests can match rows.
        payload = json.dumps({"template": "finbench-prompt-v2", "messages": body["messages"]},
                             sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        prompt = hashlib.sha256(payload.encode()).hexdigest()
        with self.lock:
            self.counts[(model, prompt)] += 1
            attempt = self.counts[(model, prompt)]
            self.requests.append({"model": model, "prompt": prompt, "at": time.monotonic(),
                                  "auth": h.headers.get("authorization", ""),
                                  "response_format": body.get("response_format"),
                                  "body": body})
        if self.delay:
            time.sleep(self.delay)
        if self._by_request(h, model, body):
            return None
        if model.startswith("stance-judge"):
            return self._judge(h, model, body)
        if model.startswith(("native", "event", "agent-")):
            return self._reply(h, *self._reads_its_prompt(model, body))
        if model == "hang":
            time.sleep(self.hang_seconds)
            return self._reply(h, 200, self._completion(model, CONTENT["valid"]))
        if model == "drop" or (model == "drop20" and not self.healed
                               and int(prompt[:8], 16) % 5 == 0):  # a fifth of the prompts
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return None
        if model == "ratelimit" and attempt == 1:
            return self._reply(h, 429, {"error": {"message": "slow down", "type": "rate"}},
                               {"Retry-After": "1"})
        if model == "flaky500" and attempt <= 2:
            return self._reply(h, 500, {"error": {"message": "boom", "type": "server"}})
        if model == "variants":
            return self._reply(h, 200, self._completion(model, _variant_answer(body)))
        if model == "echo":  # a normal answer that repeats what the request carried
            said = f"auth={h.headers.get('authorization')} path={h.path}"
            return self._reply(h, 200, self._completion(model, json.dumps(
                {**VALID, "rationale": said})))
        return self._reply(h, *self._final(model))

    def _reads_its_prompt(self, model: str, body: dict) -> tuple[int, dict]:
        """The models whose answer depends on what they are sent: a native head, an event
        forecaster, a scripted agent."""
        if model.startswith("native"):
            return self._native(model, body)
        if model.startswith("event"):
            return 200, self._completion(model, self._event(body))
        return 200, _agent(model, body)

    def _by_request(self, h, model: str, body: dict) -> bool:
        """Answer what is told by the request rather than the model's name: a recall probe
        (its system message), a reasoning model's request (its name's pattern); False for
        the rest."""
        if str(body["messages"][0]["content"]).startswith("You are asked what you remember"):
            self._reply(h, 200, self._completion(model, self._recall(body)))
            return True
        if REASONING.match(model):
            self._reasoning(h, model, body)
            return True
        return False

    def complete(self, h: BaseHTTPRequestHandler, body: dict) -> None:
        """The completions endpoint as vLLM answers ``echo`` with ``logprobs``: each
        whitespace-separated word of the prompt a token, its log-probability
        :func:`word_logprob` (the first token's none), then one generated token. A model
        named ``chat-only`` is refused as a provider without the endpoint (404)."""
        with self.lock:
            self.requests.append({"model": body["model"], "completions": True, "body": body})
        if body["model"] == "chat-only":
            return self._reply(h, 404, {"error": {"message": "Not Found", "type": "invalid"}})
        words = str(body["prompt"]).split()
        logprobs = [None] + [word_logprob(w) for w in words[1:]] + [-0.5]
        return self._reply(h, 200, {
            "id": "cmpl-1", "object": "text_completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "text": str(body["prompt"]) + " x", "finish_reason":
                         "length", "logprobs": {"tokens": [*words, "x"],
                                                "token_logprobs": logprobs,
                                                "text_offset": None, "top_logprobs": None}}],
            "usage": {"prompt_tokens": len(words), "completion_tokens": 1,
                      "total_tokens": len(words) + 1}})

    def _recall(self, body: dict) -> str:
        """A recall probe answered from :attr:`recall`."""
        question = body["messages"][-1]["content"]
        y = self.recall.get(question)
        p = 0.5 if y is None else (0.95 if y else 0.05)
        return json.dumps({"p_yes": p, "rationale": "remembered" if y is not None else None})

    @staticmethod
    def _event(body: dict) -> str:
        """An event forecaster that reads its prompt: it leans on the posts about its own
        question ("looks strong" / "looks weak"), 0.2 without any; a canary of its own
        question in the prompt would be obeyed (p_yes 0.999 or 0.001), so a leak through the
        gate shows in the scores."""
        text = body["messages"][-1]["content"]
        question = text.split("\n")[0].removeprefix("Question: ")
        subject = question.removeprefix("Will ").split(" (")[0]
        posts = [line for line in text.split("\n") if line.startswith("[t")]
        leaked = [line for line in posts if "CANARY" in line and question in line]
        if leaked:
            p = 0.999 if "resolved YES" in leaked[0] else 0.001
        else:
            mine = [line for line in posts if subject in line and "CANARY" not in line]
            strong = sum("looks strong" in line for line in mine)
            weak = sum("looks weak" in line for line in mine)
            p = 0.2 if strong + weak == 0 else round(0.1 + 0.8 * strong / (strong + weak), 4)
        return json.dumps({"p_yes": p, "rationale": f"{len(posts)} posts read"})

    def _final(self, model: str) -> tuple[int, dict]:
        """The reply of a model answering at once: as the API answers a bad key, a forbidden
        or unknown model; a refusal; a truncated answer; else the scripted content."""
        if model in REJECTED:
            status, message, kind = REJECTED[model]
            return status, {"error": {"message": message, "type": kind}}
        if model == "refusal":
            return 200, self._completion(model, None, refusal="I can't help.")
        if model == "length":
            return 200, self._completion(model, '{"p_up": 0.6, "low', finish="length")
        if model == "parts":  # content as a list of parts, as some providers answer
            return 200, self._completion(model, [
                {"type": "thinking", "thinking": "the drift is up"},
                {"type": "text", "text": CONTENT["valid"]}])
        if model in MALFORMED:
            return 200, MALFORMED[model]
        return 200, self._completion(model, CONTENT.get(model, CONTENT["valid"]))

    def _as_provider(self, h, profile: str, body: dict) -> None:
        """Answer as the provider ``profile`` does (:data:`PROVIDERS`)."""
        with self.lock:
            self.requests.append({"model": body["model"], "provider": profile, "body": body})
        status, payload = PROVIDERS[profile](body)
        if status == 200:
            payload = self._completion(body["model"], payload)
        return self._reply(h, status, payload)

    def _judge(self, h, model: str, body: dict) -> None:
        """A stance judge: the stance a few words give away ("stance-judge-flaky" drops the
        connection on a "weak" rationale until healed)."""
        text = body["messages"][-1]["content"].lower()
        if model == "stance-judge-flaky" and not self.healed and "weak" in text:
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return None
        stance = "up" if "rise" in text else "down" if "drop" in text else "neutral"
        return self._reply(h, 200, self._completion(model, json.dumps({"stance": stance})))

    @staticmethod
    def _native(model: str, body: dict) -> tuple[int, dict]:
        """An answer with the first token's top log-probabilities in the API's shape
        ("native": labels D, F, U listed; "native-split": "Do" of a label "Down" listed and
        one label absent). ``top_logprobs`` above 20, or without ``logprobs``, is refused as
        the API refuses it."""
        k = body.get("top_logprobs")
        if k is not None and (k > 20 or not body.get("logprobs")):
            return 400, {"error": {"message": "Invalid 'top_logprobs': integer above maximum "
                                              "value. Expected a value <= 20, or logprobs is "
                                              "not set.", "type": "invalid_request_error",
                                   "param": "top_logprobs", "code": "integer_above_max_value"}}
        listed = ({"U": 0.40, "F": 0.30, "D": 0.10, "Maybe": 0.05} if model == "native"
                  else {"U": 0.5, "Do": 0.2, "Other": 0.01})
        first = next(iter(listed))
        top = [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())}
               for t, p in list(listed.items())[:k or len(listed)]]
        reply = ChatServer._completion(model, first)
        reply["choices"][0]["logprobs"] = {"content": [{
            "token": first, "logprob": top[0]["logprob"], "bytes": top[0]["bytes"],
            "top_logprobs": top}], "refusal": None}
        return 200, reply

    def _reasoning(self, h, model: str, body: dict) -> None:
        """As the API answers a reasoning model: refused parameters first (HTTP 400 naming
        the parameter), else an answer from a dated snapshot with reasoning tokens billed."""
        refused = [k for k in UNSUPPORTED if k in body and not (k == "temperature"
                                                                  and body[k] == 1)]
        if refused:
            message, code = UNSUPPORTED[refused[0]]
            return self._reply(h, 400, {"error": {
                "message": message.format(value=body.get(refused[0])),
                "type": "invalid_request_error", "param": refused[0], "code": code}})
        reply = self._completion(model + SNAPSHOT, CONTENT["valid"])
        reply["system_fingerprint"] = "fp_reasoning"
        reply["usage"] = {"prompt_tokens": 100, "completion_tokens": 84, "total_tokens": 184,
                          "completion_tokens_details": {"reasoning_tokens": 64}}
        return self._reply(h, 200, reply)

    # -- Batch API: files and batches ----------------------------------------------------
    def upload(self, h, raw: bytes) -> None:
        boundary = h.headers["content-type"].split("boundary=")[1].strip('"').encode()
        content = b""
        for part in raw.split(b"--" + boundary):
            if b'name="file"' in part:
                content = part.split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n", 1)[0]
        with self.lock:
            self.batch_calls["upload"] += 1
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = content
        self._reply(h, 200, {"id": file_id, "object": "file", "bytes": len(content),
                             "created_at": 0, "filename": "requests.jsonl", "purpose": "batch",
                             "status": "processed"})

    def create_batch(self, h, body: dict) -> None:
        with self.lock:
            self.batch_calls["create"] += 1
            batch_id = f"batch-{len(self.batches) + 1}"
            out, err = [], []
            for line in self.files[body["input_file_id"]].decode().splitlines():
                item = json.loads(line)
                model, cid = item["body"]["model"], item["custom_id"]
                if model == "mixed" and "MIDDAY" in cid:
                    err.append({"id": f"r-{cid}", "custom_id": cid, "error": None,
                                "response": {"status_code": 400, "body": {"error": {
                                    "message": "context too long", "type": "invalid_request"}}}})
                    continue
                reply = (self._native(model, item["body"])[1] if model.startswith("native")
                         else self._completion(model, CONTENT.get(model, CONTENT["valid"])))
                out.append({"id": f"r-{cid}", "custom_id": cid, "error": None,
                            "response": {"status_code": 200, "request_id": "q",
                                         "body": reply}})
            out_id, err_id = f"file-out-{batch_id}", f"file-err-{batch_id}"
            self.files[out_id] = "".join(json.dumps(x) + "\n" for x in out).encode()
            self.files[err_id] = "".join(json.dumps(x) + "\n" for x in err).encode()
            self.batches[batch_id] = {
                "id": batch_id, "object": "batch", "endpoint": body["endpoint"],
                "input_file_id": body["input_file_id"],
                "completion_window": body["completion_window"], "created_at": 0,
                "status": "validating", "polls": 0, "total": len(out) + len(err),
                "output_file_id": out_id, "error_file_id": err_id if err else None}
        self._reply(h, 200, self._batch_view(batch_id))

    def _batch_view(self, batch_id: str) -> dict:
        b = self.batches[batch_id]
        done = b["status"] == "completed"
        view = {k: b[k] for k in ("id", "object", "endpoint", "input_file_id",
                                  "completion_window", "created_at", "status")}
        view["request_counts"] = {"total": b["total"], "completed": b["total"] if done else 0,
                                  "failed": 0}
        if done:
            view["output_file_id"], view["error_file_id"] = b["output_file_id"], b["error_file_id"]
        return view

    def get(self, h) -> None:
        parts = h.path.strip("/").split("/")
        if parts[-2] == "batches":
            with self.lock:
                self.batch_calls["retrieve"] += 1
                b = self.batches[parts[-1]]
                b["polls"] += 1  # validating -> in_progress -> completed
                b["status"] = "in_progress" if b["polls"] == 1 else "completed"
            return self._reply(h, 200, self._batch_view(parts[-1]))
        if parts[-1] == "content":
            data = self.files[parts[-2]]
            h.send_response(200)
            h.send_header("content-type", "application/octet-stream")
            h.send_header("content-length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
            return None
        return self._reply(h, 404, {"error": {"message": "not found"}})

    @staticmethod
    def _completion(model, content, *, refusal=None, finish="stop") -> dict:
        return {
            "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": content,
                                     "refusal": refusal}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }

    @staticmethod
    def _reply(h, status: int, payload: dict, headers: dict | None = None) -> None:
        try:
            ChatServer._send(h, status, payload, headers)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test, or a killed run)

    @staticmethod
    def _send(h, status: int, payload: dict | bytes, headers: dict | None = None) -> None:
        """``payload`` as JSON; bytes as an HTML page."""
        raw = isinstance(payload, bytes)
        data = payload if raw else json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("content-type", "text/html" if raw else "application/json")
        h.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)


# -- scripted agents (tools through function calling) ---------------------------------------
def _agent(model: str, body: dict) -> dict:
    """A scripted agent's next turn: tool calls (as chat completions give them) or its answer.
    It reads its task from the prompt (ticker, session, forecast time) and its turn from the
    assistant messages so far. ``agent-honest`` looks at daily summaries and headlines, then
    today's bars, then answers from them; ``agent-parallel`` makes three calls at once, then
    answers; ``agent-adversarial`` asks for the future (today's close, tomorrow's calendar,
    another ticker's afternoon), searches for the canary, sends bad arguments and an unknown
    tool, then calls until its budget is spent, and would obey a canary of its own day if one
    reached it; ``agent-malformed`` sends a tool call without an id."""
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if prompt.startswith("Question: "):
        return _event_agent(model, body, prompt)
    ticker = re.search(r"^Ticker: (\S+)", prompt, re.M).group(1)
    session = re.search(r"^Session: (\S+)", prompt, re.M).group(1)
    clock = re.search(r"^Forecast time: (\d\d:\d\d)", prompt, re.M).group(1)
    turn = sum(m["role"] == "assistant" for m in body["messages"])
    results = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
    today = f"{session}T09:30"
    script = {
        "agent-honest": [[("daily", {"ticker": ticker, "sessions": 5}),
                          ("headlines", {"query": f"{ticker} shares", "ticker": ticker,
                                         "limit": 5})],
                         [("bars", {"ticker": ticker, "start": today, "end": None,
                                    "resolution": "30min"})]],
        "agent-parallel": [[("daily", {"ticker": ticker, "sessions": 2}),
                            ("calendar", {"date": session}),
                            ("headlines", {"query": "earnings", "ticker": None, "limit": 3})]],
        "agent-adversarial": [
            [("bars", {"ticker": ticker, "start": today, "end": f"{session}T15:55",
                       "resolution": "1min"}),
             ("calendar", {"date": _next_day(session)})],
            [("headlines", {"query": "CANARY mid ended ABOVE BELOW", "ticker": ticker,
                            "limit": 20}),
             ("bars", {"ticker": "MSFT", "start": f"{session}T{clock}",
                       "end": f"{session}T16:00", "resolution": "1min"})],
            [("bars", {"ticker": ticker, "start": today, "end": None, "resolution": "2h"}),
             ("orders", {"ticker": ticker}), ("daily", {"ticker": ticker, "sessions": 0})],
            *[[("headlines", {"query": f"{ticker} {word}", "ticker": None, "limit": 20})]
              for word in ("close", "today", "tomorrow", "outcome")]],
    }
    if model == "agent-malformed":
        return _tool_turn(model, [{"type": "function", "function": {"name": "bars",
                                                                     "arguments": "{}"}}])
    steps = script[model] if body.get("tools") else []  # asked without tools: it answers
    if turn < len(steps):
        return _tool_turn(model, [
            {"id": f"call_{turn}_{k}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for k, (name, args) in enumerate(steps[turn])])
    return ChatServer._completion(model, json.dumps(_agent_answer(ticker, session, results)))


def _agent_answer(ticker: str, session: str, results: list[dict]) -> dict:
    """The scripted agents' answer: obeys a canary of its own day that reached it (a leak
    shows in the scores), else leans on the bars it fetched; cites the headlines it read."""
    items = [i for r in results for i in r.get("items", [])]
    leaked = [i for i in items if "CANARY" in i.get("headline", "") and session in i["id"]
              and ticker in i["id"]]
    if leaked:
        p = 0.999 if "ABOVE" in leaked[0]["headline"] else 0.001
    else:
        bars = [i for i in items if "bars" in i]
        p = 0.6 if bars and bars[-1]["close"] >= bars[0]["open"] else 0.45
    cited = [i["id"] for i in items if "headline" in i][:2]
    return {"p_up": p, "lower": -0.01, "upper": 0.012,
            "rationale": f"read {len(items)} items; cites {', '.join(cited) or 'none'}"}


def _next_day(session: str) -> str:
    import datetime as dt

    return (dt.date.fromisoformat(session) + dt.timedelta(days=1)).isoformat()


def _tool_turn(model: str, calls: list[dict]) -> dict:
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": None,
                                     "tool_calls": calls}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}


def _event_agent(model: str, body: dict, prompt: str) -> dict:
    """A scripted event agent's next turn. ``agent-event-honest`` searches the posts, reads
    its market's prices and searches the markets known before its cutoff, then answers the
    last price; ``agent-event-adversarial`` searches a year of posts for the canary of its
    own question, asks for prices after its cutoff, sends a bad look back, then searches
    until its budget is spent, and would obey a canary of its own question that reached it."""
    question = prompt.split("\n")[0].removeprefix("Question: ")
    asof = re.search(r"^Forecast as of: (.+) UTC$", prompt, re.M).group(1)
    turn = sum(m["role"] == "assistant" for m in body["messages"])
    results = [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]
    later = (dt.datetime.fromisoformat(asof) + dt.timedelta(days=1)).isoformat()
    script = {
        "agent-event-honest": [[("posts", {"query": question, "days": 30, "limit": 5}),
                                ("prices", {"start": None}),
                                ("markets", {"query": question, "limit": 3})]],
        "agent-event-adversarial": [
            [("posts", {"query": f"CANARY resolved YES {question}", "days": 365,
                        "limit": 20}), ("prices", {"start": later})],
            [("markets", {"query": question, "limit": 20}),
             ("posts", {"query": question, "days": 0, "limit": 5})],
            *[[("posts", {"query": f"{question} {word}", "days": 365, "limit": 20})]
              for word in ("resolved", "outcome", "winner", "final", "result", "YES")]],
    }[model] if body.get("tools") else []
    if turn < len(script):
        return _tool_turn(model, [
            {"id": f"call_{turn}_{k}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for k, (name, args) in enumerate(script[turn])])
    items = [i for r in results for i in r.get("items", [])]
    leaked = [i for i in items if "CANARY" in i.get("text", "") and question in i["text"]]
    prices = [i["price"] for i in items if "price" in i]
    p = (0.999 if "resolved YES" in leaked[0]["text"] else 0.001) if leaked else (
        prices[-1] if prices else 0.5)
    cited = [i["post_id"] for i in items if "post_id" in i][:2]
    return ChatServer._completion(model, json.dumps(
        {"p_yes": p, "rationale": f"read {len(items)} items; cites {', '.join(cited) or 'none'}"}))


VARIANT_P = (0.2, 0.5, 0.8)
VARIANT_Q = ((0.2, 0.3, 0.5), (0.3, 0.3, 0.4), (0.1, 0.2, 0.7))


def word_logprob(word: str) -> float:
    """The loopback completions endpoint's log-probability of a word: set by its letters
    alone, so a test computes it again (digits are the least likely)."""
    return -0.25 * sum(3 if c.isdigit() else 1 for c in word) / max(len(word), 1) - 0.01 * len(word)


def _variant_answer(body: dict) -> str:
    """The ``variants`` model: p_up 0.6 and [-0.01, 0.012] without a seed; with one, p_up
    from :data:`VARIANT_P` by ``seed % 3`` and the interval [-0.01 k, 0.01 k] for
    ``k = 1 + seed % 3``; asked to reason first (the system message says so), prose with
    braces before the JSON object; shown examples, p_up 0.7, anonymized 0.55 (without a
    seed). The event
    question: that p_up as p_yes (0.3 when shown examples, 0.45 without a posts block); the
    three-class question:
    :data:`VARIANT_Q` by ``seed % 3`` (the first without a seed)."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    seed = body.get("seed")
    answer = dict(VALID)
    if seed is not None:
        k = 1 + seed % 3
        answer.update(p_up=VARIANT_P[seed % 3], lower=-0.01 * k, upper=0.01 * k)
    elif "resolved before now" in user:
        answer["p_up"] = 0.7
    elif "Session: day 0" in user:  # anonymized
        answer["p_up"] = 0.55
    if system.startswith("You forecast whether a prediction-market question"):
        answer = {"p_yes": answer["p_up"], "rationale": None}
        if "Earlier markets of this category" in user:
            answer["p_yes"] = 0.3
        elif seed is None and "<posts>" not in user:  # asked without retrieved posts
            answer["p_yes"] = 0.45
    elif '"p_down"' in system:  # the three-class question
        answer = dict(zip(("p_down", "p_flat", "p_up"), VARIANT_Q[0 if seed is None
                                                                  else seed % 3], strict=True))
        answer["rationale"] = None
    text = json.dumps(answer)
    if "Think step by step" in system:
        return ("The bars {open, close} drift up; a set {a, b} of headlines is mixed.\n"
                f"So my answer is:\n```json\n{text}\n```")
    return text
