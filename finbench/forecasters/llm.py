"""LLM forecasters over the official ``openai`` client (OpenAI or any compatible server).

Calls run on asyncio with a per-model concurrency limit and request/token rate limits; the
client retries 408/409/429/5xx and connection errors with jittered exponential backoff that
honours ``Retry-After`` (bounded by ``max_retries``), each attempt bounded by ``timeout``. A call
that still gets no answer is journalled with ``answer_status = "error"`` and its reason (not
an answer: the next run of the directory asks it again, up to ``max_attempts`` runs). Answers
are cached (SQLite) by provider, model, parameters and prompt hash, and journalled as they
arrive (the answers of one turn of the event loop in one write, transcripts first).

The API key is read from the environment variable the config names, at call time; it is
never written anywhere, and any error text that might echo it is scrubbed.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
import re
import sys
import time
from dataclasses import replace
from urllib.parse import unquote, urlsplit

import pandas as pd

from finbench.core.config import url_credentials, url_problem
from finbench.core.errors import ConfigError, ModelStopped
from finbench.core.prompting import last_json_object
from finbench.core.times import from_ns
from finbench.forecasters.agent import AgentRun, check_tools, converse, messages_digest
from finbench.forecasters.answers import (
    ParsedAnswer,
    loads,
    parse_answer,
)
from finbench.forecasters.base import Forecaster, make_record, register
from finbench.forecasters.cache import ResponseCache, request_key
from finbench.forecasters.completion import completion_dict
from finbench.forecasters.sampling import aggregate, combine, read_sample
from finbench.runlog.rows import ANSWERED, ERROR
from finbench.tracks.base import Inputs, Prompt, Rendered
from finbench.tracks.tools import agent_input_sha256

DEFAULT_OUTPUT_TOKENS = 200
STOP_STATUSES = {401: "the API key is rejected", 403: "the key may not use this model",
                 404: "no such model or endpoint path"}  # no later call can succeed
# a 400 with these codes refuses the request's parameters, which every call shares
REQUEST_REFUSED = {
    "unsupported_parameter": "the model refuses a parameter of the config: reasoning models "
                             "take max_completion_tokens, not max_tokens",
    "unsupported_value": "the model refuses a value of the config: reasoning models accept "
                         "only the default temperature (leave temperature unset)"}
RETRYABLE = {408, 409, 429}  # and 5xx: the same request may be answered later
CONNECTIONS_PER_CLIENT = 8
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


@functools.cache
def tls_context():
    """The TLS context of every client this process makes, made once as the client would
    make its own (``httpx2.create_ssl_context``: the system's certificates, or those
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` name): making one reads the certificate store, about
    20 ms, which each of a chunk's clients paid again in every chunk."""
    import httpx2

    return httpx2.create_ssl_context()


def stop_reason(response: dict, *, answered_before: bool) -> str | None:
    """Why no later call of a model can succeed, when ``response`` says so (its key, model or
    path refused; an endpoint that cannot be reached before any call was answered)."""
    if response.get("stop"):
        return response["stop"]
    if response.get("unreachable") and not answered_before:
        return f"the endpoint cannot be reached ({response['transport_error']})"
    return None


def estimate_tokens(messages: list[dict[str, str]]) -> int:
    """A rough token count (4 characters a token) for dry-run cost estimates and the token
    rate limit."""
    return -(-sum(len(m.get("content") or "") + len(json.dumps(m["tool_calls"]))
                  if "tool_calls" in m else len(m.get("content") or "")
                  for m in messages) // 4)


def answer_mode(model) -> str:
    """How a model's answer text is read: its ``structured`` setting, or ``"think"`` for a
    variant that reasons first (the JSON object that ends the text)."""
    variant = getattr(model, "prompt", None)
    return "think" if variant is not None and variant.reasoning == "think" else model.structured


def interpret(response: dict, structured: str, parse=parse_answer) -> ParsedAnswer:
    """Turn a stored response (content, refusal, finish_reason) into a validated answer
    (``parse``: the schema's parser; ``structured``: :func:`answer_mode`)."""
    content = response.get("content") or ""
    if response.get("refusal"):
        return ParsedAnswer(False, f"refusal: {response['refusal']}", response["refusal"])
    if response.get("finish_reason") == "length":
        return ParsedAnswer(False, "truncated: finish_reason=length", content)
    if not content.strip():
        return ParsedAnswer(False, "empty: no content in the answer", content)
    text = content
    if structured == "think":
        found = last_json_object(content)
        if found is None:
            return ParsedAnswer(False, "not_json: the reasoning does not end with a JSON "
                                       "object", content)
        text = found
    elif structured == "text":
        match = _JSON_OBJECT.search(content)
        if not match:
            return ParsedAnswer(False, "not_json: no JSON object in the text", content)
        text = match.group(0)
    payload = text
    try:
        obj = loads(text)
        if isinstance(obj, dict) and obj.get("rationale", "") is None:
            obj.pop("rationale")  # strict schemas make the optional field required-nullable
            payload = obj
    except ValueError:  # not JSON, or a field named twice: the parser says which
        pass
    return replace(parse(payload), raw=content)


class RateLimiter:
    """Spaces request starts to ``rpm`` and estimated tokens to ``tpm`` per minute.
    ``after``: :attr:`after` of the limiter of the same model's calls before these (a run
    calls a model a context chunk at a time, each in an event loop of its own): the spacing
    holds across them."""

    def __init__(self, rpm: float | None, tpm: float | None, *,
                 after: tuple[float, float] = (0.0, 0.0)) -> None:
        self.rpm, self.tpm = rpm, tpm
        self._next_request, self._next_tokens = after
        self._lock = asyncio.Lock()

    @property
    def after(self) -> tuple[float, float]:
        """When the next request may start by the request and the token spacing
        (``time.monotonic``)."""
        return self._next_request, self._next_tokens

    async def acquire(self, tokens: int) -> None:
        if not self.rpm and not self.tpm:
            return
        async with self._lock:
            now = time.monotonic()
            start = max(now, self._next_request if self.rpm else now,
                        self._next_tokens if self.tpm else now)
            if self.rpm:
                self._next_request = start + 60.0 / self.rpm
            if self.tpm:
                self._next_tokens = start + 60.0 * tokens / self.tpm
        delay = start - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


@register("openai")
class OpenAIForecaster(Forecaster):
    streaming = True

    def __init__(self, config, prompt: Prompt | None = None) -> None:
        if prompt is None:
            raise ConfigError(f"models.{config.name}: an LLM forecaster needs the prompt of "
                              "the run's track (build it with the track's prompt)")
        super().__init__(config, prompt.for_model(config))
        # per task id: the runs that asked it and got no answer (set by the run from its
        # journal), so a retried call's row says which attempt it is
        self.attempts_before: dict[str, int] = {}
        self.rate_share = 1.0  # the part of the rate limits this process may use
        self.rate_after = (0.0, 0.0)  # RateLimiter.after of this model's last calls
        self.toolbox = None  # an agent's: the track's tools (set by the run, use_tools)
        self.base_url = config.base_url or (
            os.environ.get(config.base_url_env) if config.base_url_env else None)
        if self.base_url and config.base_url_env and (problem := url_problem(self.base_url)):
            raise ConfigError(f"models.{config.name}: the URL in {config.base_url_env} {problem}")
        if self.base_url and url_credentials(self.base_url) and not config.allow_url_credentials:
            raise ConfigError(f"models.{config.name}: the URL in {config.base_url_env} holds "
                              "credentials (user:password@), sent as Basic auth; set "
                              "allow_url_credentials = true to use it (they are scrubbed from "
                              "everything written)")

    def use_tools(self, toolbox) -> None:
        """Give an agent (a model config with ``tools``) the track's tools; a ConfigError
        when the track has none, or not those named."""
        names = list(self.config.tools)
        if not names:
            return
        check_tools(self.name, names, toolbox)
        self.toolbox = toolbox

    def secrets(self) -> list[str]:
        """Every credential this model's requests carry (the API key, any user and password
        in its URL): none of them is ever written, answers included."""
        key = os.environ.get(self.config.api_key_env, "")
        found = [key, *url_credentials(self.base_url or "")]
        parts = urlsplit(self.base_url or "")
        if parts.username is not None:  # sent as Basic auth: base64 of user:password
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            found.append(base64.b64encode(pair.encode()).decode())
        return sorted({s for s in found if len(s) >= 3}, key=len, reverse=True)

    def scrubbed(self, response: dict, secrets: list[str] | None = None) -> dict:
        """A response with every credential in its text replaced by ``***`` (a server may
        echo them inside a normal answer); ``secrets``: :meth:`secrets`, when known."""
        secrets = self.secrets() if secrets is None else secrets
        out = {k: scrub(v, secrets) if isinstance(v, str) else v for k, v in response.items()}
        if isinstance(out.get("body"), dict):  # the response as received (transcripts)
            text = json.dumps(out["body"])
            if any(s in text for s in secrets):  # (else it is the body as it came)
                out["body"] = json.loads(scrub(text, secrets))
        return out

    # -- planning ------------------------------------------------------------------------
    def params(self) -> dict:
        c = self.config
        params = {"temperature": c.temperature, "seed": c.seed, "max_tokens": c.max_tokens,
                  "structured": c.structured, "template": self.prompt.template}
        # keys added later count only when set, so answers cached before them still match
        for key in ("max_completion_tokens", "reasoning_effort", "extra_body"):
            if getattr(c, key) is not None:
                params[key] = getattr(c, key)
        if c.tools:  # an agent: its tools and budgets
            params.update(tools=list(c.tools), max_tool_calls=c.max_tool_calls,
                          max_turns=c.max_turns, max_task_tokens=c.max_task_tokens)
        return params

    def plan(self, inputs: Inputs, rendered: Rendered | None = None
             ) -> list[tuple[list[dict], str]]:
        """Messages and their hash for every task (rendered from the gated contexts and, for
        a variant shown examples, the label history)."""
        rendered = rendered or self.prompt.render(inputs)
        return [(m, self.prompt.sha256(m)) for m in rendered.messages]

    def estimate(self, inputs: Inputs) -> dict:
        """Calls, estimated tokens and cost for a dry run (no request is made)."""
        tokens_in = sum(estimate_tokens(m) for m, _ in self.plan(inputs))
        calls = len(inputs.tasks) * self.config.prompt.samples
        tokens_in *= self.config.prompt.samples
        if self.config.tools:  # an agent: as if each task took every turn it may, each
            # sending its prompt again (its tools' answers, unknown before, not counted)
            calls *= self.config.max_turns
            tokens_in *= self.config.max_turns
        tokens_out = calls * self.output_budget()
        cost = None
        if self.config.price_input_per_1m is not None and self.config.price_output_per_1m is not None:
            cost = (tokens_in * self.config.price_input_per_1m
                    + tokens_out * self.config.price_output_per_1m) / 1e6
        return {"calls": calls, "tokens_in": tokens_in, "tokens_out": tokens_out, "cost": cost}

    def output_budget(self) -> int:
        """Output tokens a call may use at most (reasoning tokens included), for estimates."""
        c = self.config
        return c.max_completion_tokens or c.max_tokens or DEFAULT_OUTPUT_TOKENS

    # -- running -------------------------------------------------------------------------
    def _answer(self, inputs: Inputs) -> tuple[list, dict]:  # pragma: no cover - streaming
        raise NotImplementedError("the openai forecaster streams: use run_stream")

    def run_stream(self, inputs: Inputs, journal, echo=print, cache: ResponseCache | None = None):
        """Answer every task, journalling each row in the turn of the event loop its answer
        arrives in."""
        rendered = self.prompt.render(inputs)
        plan = self.plan(inputs, rendered)
        # as lists: a call's look-ups are Python's, not pandas' (a few microseconds each)
        ctx_time = inputs.contexts.max_input_time.tolist()
        task_ids = inputs.tasks["task_id"].tolist()
        examples = None if rendered.examples is None else (
            rendered.examples, from_ns(rendered.examples_known).tolist())

        def keep(i: int, response: dict, latency: float, from_cache: bool,
                 agent: AgentRun | None = None) -> tuple[dict, dict]:
            task_id = task_ids[i]
            attempt = self.attempts_before.get(task_id, 0) + 1
            sha, latest, messages = plan[i][1], ctx_time[i], plan[i][0]
            shown = None
            if examples is not None:  # the labels it was shown: known before its now
                shown = (examples[0][i], examples[1][i])
                if pd.notna(shown[1]) and (pd.isna(latest) or shown[1] > latest):
                    latest = shown[1]
            if agent is not None:  # what its tools answered is part of its input
                sha = agent_input_sha256(sha, [r["result_sha256"] for r in agent.receipts])
                found = agent.max_available()
                latest = latest if found is None or (pd.notna(latest) and latest >= found) \
                    else found
                messages = agent.messages
            record = answer_record(self, task_id=task_id, sha=sha, max_input_time=latest,
                                   context_max_input_time=ctx_time[i], response=response,
                                   latency=latency, from_cache=from_cache, attempt=attempt,
                                   agent=agent, prompt_sha256=plan[i][1], examples=shown)
            return record, {"model": self.name, "task_id": task_id, "attempt": attempt,
                            "input_sha256": sha, "messages": messages, "response": response}

        return self.call_all(plan, keep, journal, echo, cache, tasks=inputs.tasks)

    def call_all(self, plan: list[tuple[list[dict], str]], keep, journal, echo=print,
                 cache: ResponseCache | None = None, tasks: pd.DataFrame | None = None) -> dict:
        """Make the calls of ``plan`` (messages and their hash), concurrently and rate-limited,
        answers from the cache where it has them; ``keep(i, response, latency, from_cache)``
        turns each answer into (journal record, transcript), appended to ``journal`` as it
        arrives. An agent (a model with tools, :attr:`toolbox` set) converses on each of
        ``tasks`` (the plan's, in its order) and ``keep`` is given its
        :class:`~finbench.forecasters.agent.AgentRun` as a fifth argument (else None).
        Returns counts; raises :class:`ModelStopped` when no call can succeed."""
        own_cache = cache is None
        cache = cache or ResponseCache()
        agent_tasks = None if self.toolbox is None or tasks is None else tasks.to_dict("records")
        try:
            return asyncio.run(self._run_all(plan, keep, journal, echo, cache, agent_tasks))
        finally:
            if own_cache:
                cache.close()

    async def _run_all(self, plan, keep, journal, echo, cache, agent_tasks=None) -> dict:
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient

        from finbench.forecasters.transport import client_transport

        key = os.environ.get(self.config.api_key_env, "")
        secrets = self.secrets()
        # aiohttp under the client (its errors the client's: forecasters/transport.py); on the
        # client's default transport (where the environment names a proxy) httpcore scans
        # every pooled connection on each request, and a few clients with small pools keep
        # that scan short at high concurrency. They share one TLS context.
        transport = client_transport(tls_context())
        n_clients = 1 if transport is not None else max(
            1, -(-self.config.concurrency // CONNECTIONS_PER_CLIENT))
        clients = [AsyncOpenAI(api_key=key, base_url=self.base_url, timeout=self.config.timeout,
                               max_retries=self.config.max_retries,
                               http_client=DefaultAsyncHttpxClient(verify=tls_context(),
                                                                   transport=transport))
                   for _ in range(n_clients)]
        semaphore = asyncio.Semaphore(self.config.concurrency)
        rpm, tpm = self.config.requests_per_minute, self.config.tokens_per_minute
        limiter = RateLimiter(rpm and rpm * self.rate_share, tpm and tpm * self.rate_share,
                              after=self.rate_after)
        stats = {"done": 0, "valid": 0, "errors": 0, "tokens_in": 0, "tokens_out": 0, "cached": 0,
                 "requests": 0, "answered": 0, "start": time.perf_counter(), "last_echo": 0.0}
        stop: dict[str, str] = {}  # why the model's calls cannot succeed, once one says so
        total = len(plan)
        journalled_at_once = agent_tasks is None and self.config.prompt.samples == 1

        async def ask(i: int, messages: list[dict], rkey: str, tools=None, sample: int = 0
                      ) -> dict | None:
            """One completion, from the cache or asked (None: the model cannot be called);
            ``sample``: which of a sampled variant's answers it is."""
            response = cache.get(rkey)
            if response is not None:
                stats["cached"] += 1
                response["_cached"] = True
            else:
                async with semaphore:
                    if stop:  # the model cannot be reached: no more calls, nothing journalled
                        return None
                    await limiter.acquire(estimate_tokens(messages))
                    stats["requests"] += 1
                    response = await self._call(clients[i % n_clients], messages, secrets,
                                                tools=tools, sample=sample)
                reason = stop_reason(response, answered_before=bool(stats["answered"]))
                if reason:  # this call, and any later one, cannot succeed
                    stop.setdefault("reason", reason)
                    return None
                if not {"transport_error", "request_refused"} & response.keys():
                    stats["answered"] += 1
                    # an answer journalled at once may wait to be cached; a turn or a
                    # sample, which the cache alone keeps, may not
                    cache.put(rkey, response, held=journalled_at_once)
            usage = response.get("usage") or {}
            stats["tokens_in"] += usage.get("prompt_tokens") or 0
            stats["tokens_out"] += usage.get("completion_tokens") or 0
            return response

        turns = TurnJournal(journal, stats, lambda: self._progress(stats, total, echo))

        async def one(i: int) -> None:
            started = time.perf_counter()
            got = await self._answer(lambda *a: ask(i, *a), plan[i],
                                     None if agent_tasks is None else agent_tasks[i])
            if got is None:
                return
            response, agent = got
            from_cache = bool(response.pop("_cached", False))
            latency = time.perf_counter() - started
            await turns.add(*keep(i, response, latency, from_cache, agent))

        try:
            await asyncio.gather(*(one(i) for i in range(total)))
        finally:
            self.rate_after = limiter.after  # the next chunk's calls keep the spacing
            for client in clients:
                await client.close()
        self._progress(stats, total, echo, final=True)
        if stop:
            raise ModelStopped(
                f"{self.name}: stopped at the first call that cannot succeed: {stop['reason']} "
                f"({stats['done']} answers journalled before it are kept; the failed calls are "
                "not answers and are not journalled). Fix the key, model or base_url and give "
                "the same command again: it resumes")
        return stats

    async def _answer(self, ask, planned: tuple[list[dict], str], task
                      ) -> tuple[dict, AgentRun | None] | None:
        """A task's response (and, for an agent on ``task``, what it did; None: not one),
        ``ask(messages, key, tools)`` making each call; None when the model cannot be called."""
        messages, sha = planned
        samples = self.config.prompt.samples
        if task is None and samples > 1:  # the same prompt asked again, each its own key
            got = await asyncio.gather(*(ask(messages, self.cache_key(sha, sample=s), None, s)
                                         for s in range(samples)))
            if any(r is None for r in got):
                return None
            cached = all([r.pop("_cached", False) for r in got])  # popped from each
            return {**combine(got), **({"_cached": True} if cached else {})}, None
        if task is None:
            response = await ask(messages, self.cache_key(sha))
            return None if response is None else (response, None)
        tools = self.toolbox.schemas(self.config.tools)
        agent = await converse(lambda sent, now: ask(sent, self.turn_key(sent, now), tools),
                               self.toolbox, task, messages, self.config)
        return None if agent is None else (agent.response, agent)

    def request_body(self, messages: list[dict], sample: int = 0) -> dict:
        """The chat-completions request body for these messages (online and batch alike);
        ``sample``: of a sampled variant's answers, the one asked (with a ``seed``, sample
        ``s`` is asked with ``seed + s``)."""
        c = self.config
        kwargs: dict = {"model": c.model, "messages": messages}
        if c.temperature is not None:
            kwargs["temperature"] = c.temperature
        if c.seed is not None:
            kwargs["seed"] = c.seed + sample
        for key in ("max_tokens", "max_completion_tokens", "reasoning_effort"):
            if getattr(c, key) is not None:
                kwargs[key] = getattr(c, key)
        options = self.prompt.request_options(c)  # (a question read from log-probabilities)
        if options:
            kwargs.update(options)
        elif c.structured == "json_schema":
            kwargs["response_format"] = self.response_schema()
        elif c.structured == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        return {**kwargs, **(c.extra_body or {})}  # the config refuses keys set above

    def response_schema(self) -> dict:
        """The strict schema of the answer, as the track's prompt gives it."""
        return self.prompt.response_schema()

    def cache_key(self, sha: str, sample: int = 0) -> str:
        """A completion's key: provider, model, parameters and the prompt's hash; a sampled
        variant's later samples add their number (the first is the prompt asked once: the
        same request, so the same answer whatever the samples after it)."""
        params = self.params() if not sample else {**self.params(), "sample": sample}
        return request_key(base_url=self.base_url or "openai", model=self.config.model,
                           params=params, messages_sha256=sha)

    def turn_key(self, messages: list[dict], now: pd.Timestamp) -> str:
        """An agent's completion key: its exchange so far, its tools, the task's ``now`` and
        the snapshot answering the tools (with the provider, model and parameters)."""
        params = {**self.params(), "tools": list(self.config.tools), "now": now.isoformat(),
                  "snapshot_sha256": self.toolbox.snapshot_sha256}
        return request_key(base_url=self.base_url or "openai", model=self.config.model,
                           params=params, messages_sha256=messages_digest(messages))

    async def _call(self, client, messages: list[dict], secrets: list[str], tools=None,
                    sample: int = 0) -> dict:
        import openai

        c = self.config
        kwargs = self.request_body(messages, sample)
        if tools:  # an agent's turn: the track's tools, called as the model decides
            kwargs.update(tools=tools, tool_choice="auto")
        try:
            # The client's own POST (its retries, backoff, timeouts and errors) with plain JSON
            # both ways: the typed ``create`` re-walks every message field and builds response
            # models, ~2-3 ms of CPU a call; the answer is re-validated by FinBench anyway. The
            # body goes as JSON bytes: as a dict the client deep-copies and re-encodes it.
            resp = await client.post("/chat/completions", cast_to=dict,
                                     content=json.dumps(kwargs, ensure_ascii=False).encode())
        except openai.APITimeoutError:
            return {"transport_error": f"timeout: no answer within {c.timeout:g} s "
                                       f"after {c.max_retries} retries"}
        except openai.APIConnectionError as exc:
            return {"transport_error": scrub(f"connection: {exc}", secrets),
                    "unreachable": _cannot_connect(exc)}
        except openai.APIStatusError as exc:
            said = exc.body.get("message") if isinstance(exc.body, dict) else None
            text = scrub(f"http_{exc.status_code}: {said or exc.message}", secrets)
            if exc.status_code in STOP_STATUSES:  # the key, the model or the path is wrong
                return {"stop": f"{text} ({STOP_STATUSES[exc.status_code]})"}
            code = exc.body.get("code") if isinstance(exc.body, dict) else None
            if exc.status_code == 400 and code in REQUEST_REFUSED:  # every request alike
                return {"stop": f"{text} ({REQUEST_REFUSED[code]})"}
            if exc.status_code in RETRYABLE or exc.status_code >= 500:
                return {"transport_error": text}
            return {"request_refused": text}  # this request, as sent, will never be answered
        return self.scrubbed({**completion_dict(resp), "body": resp}, secrets)

    def _progress(self, stats: dict, total: int, echo, *, final: bool = False) -> None:
        now = time.perf_counter()
        if not final and now - stats["last_echo"] < 1.0 and stats["done"] < total:
            return
        stats["last_echo"] = now
        elapsed = now - stats["start"]
        done = stats["done"]
        eta = elapsed / done * (total - done) if done else float("nan")
        cost = ""
        c = self.config
        if c.price_input_per_1m is not None and c.price_output_per_1m is not None:
            dollars = (stats["tokens_in"] * c.price_input_per_1m
                       + stats["tokens_out"] * c.price_output_per_1m) / 1e6
            cost = f", cost ${dollars:.4f}"
        answered = done - stats["errors"]
        share = stats["valid"] / answered if answered else 0.0
        errors = f", errors {stats['errors']} (asked again by the next run)" if stats[
            "errors"] else ""
        echo(f"{self.name}: {done}/{total} calls, valid {share:.0%}{errors}, tokens "
             f"{stats['tokens_in']}+{stats['tokens_out']}{cost}, cached {stats['cached']}, "
             f"{elapsed:.1f}s elapsed, ETA {eta:.1f}s")
        sys.stdout.flush()


class TurnJournal:
    """Answers journalled by turns of the event loop: the first answer of a turn waits for
    the others that arrived with it, then all are one transaction of transcripts and one
    journal write (each answer alone: 0.2 ms of the engine's 0.5 ms a call). None waits
    longer than its turn, nor is lost when the run is stopped meanwhile."""

    def __init__(self, journal, stats: dict, progress) -> None:
        self.journal, self.stats, self.progress = journal, stats, progress
        self.pending: list[tuple[dict, dict]] = []  # (record, transcript), not yet journalled

    async def add(self, record: dict, transcript: dict) -> None:
        self.pending.append((record, transcript))
        if len(self.pending) > 1:  # the turn's first answer journals it
            return
        try:
            await asyncio.sleep(0)
        finally:
            if self.pending:
                self._write()

    def _write(self) -> None:
        records = [record for record, _ in self.pending]
        transcripts = [transcript for _, transcript in self.pending]
        self.pending.clear()
        self.journal.append_records(records, sync=False, transcripts=transcripts)
        for record in records:
            self.stats["valid"] += int(record["valid"])
            self.stats["errors"] += int(record.get("answer_status") == ERROR)
        self.stats["done"] += len(records)
        self.progress()


def answer_record(forecaster, *, task_id: str, sha: str, max_input_time, response: dict,
                  latency: float, from_cache: bool, attempt: int = 1,
                  context_max_input_time=None, agent: AgentRun | None = None,
                  prompt_sha256: str | None = None, examples=None) -> dict:
    """The journal row of one LLM answer (online or batch). An online call that got no
    answer (``transport_error``) is a row of ``answer_status = "error"`` numbered by its
    ``attempt`` (runs that asked it, this one included). A request refused as sent (HTTP
    4xx but 408/409/429) and a Batch API line that failed are invalid answers with the API's
    reason: asking again would get the same. ``agent``: what an agent did (its receipts
    and counts go into the row's detail, its tokens are every turn's; an agent that ended
    without an answer, ``agent_error``, gave an invalid one); ``context_max_input_time``: its
    context's alone (default ``max_input_time``); ``examples``: (task ids, when the latest
    became known) of the earlier resolved tasks its prompt shows. A sampled variant's
    response holds its ``samples``, read one by one and aggregated
    (:mod:`~finbench.forecasters.sampling`)."""
    status = ANSWERED
    detail = {"template": forecaster.prompt.template, "finish_reason": response.get("finish_reason"),
              "cached": from_cache, **served(response)}
    if "transport_error" in response:
        reason = response["transport_error"]
        if "batch_id" not in response:
            status, most = ERROR, forecaster.config.max_attempts
            detail.update(attempt=attempt, max_attempts=most)
            reason += f" (attempt {attempt} of {most}{'; final' if attempt >= most else ''})"
        parsed = ParsedAnswer(False, reason, "")
    elif "request_refused" in response:  # a 400/413/422...: the answer to this request
        parsed = ParsedAnswer(False, response["request_refused"], "")
    elif "agent_error" in response:  # an agent's budget spent, or a call it cannot make
        parsed = ParsedAnswer(False, response["agent_error"], response.get("content") or "")
    elif "samples" in response:
        variant = forecaster.config.prompt
        parsed, kept = aggregate(
            [read_sample(r, lambda r: forecaster.prompt.parse(r, forecaster.config))
             for r in response["samples"]], variant.aggregate, variant.needed)
        detail.update(kept)
    else:
        parsed = forecaster.prompt.parse(response, forecaster.config)
    detail.update(forecaster.prompt.answer_detail(response, forecaster.config))
    history_time = pd.NaT
    if examples is not None:
        detail["examples"] = list(examples[0])
        history_time = examples[1]
    if "batch_id" in response:
        detail["batch_id"] = response["batch_id"]
    usage = response.get("usage") or {}
    tokens = (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0)
    if agent is not None:
        # its tokens are every turn's (the served model and fingerprint, its last turn's)
        detail.update(prompt_sha256=prompt_sha256, turns=agent.turns,
                      tool_calls=agent.receipts, refusals=agent.refusals,
                      prompt_tokens=agent.prompt_tokens,
                      completion_tokens=agent.completion_tokens,
                      reasoning_tokens=agent.reasoning_tokens)
        tokens = agent.tokens
    return make_record(task_id=task_id, model=forecaster.name, kind=forecaster.kind,
                       parsed=parsed, max_input_time=max_input_time,
                       context_max_input_time=(max_input_time if context_max_input_time is None
                                               else context_max_input_time),
                       history_max_input_time=history_time,
                       input_sha256=sha, detail=json.dumps(detail, sort_keys=True),
                       latency=latency, tokens=tokens or None, answer_status=status)


def served(response: dict) -> dict:
    """What answered, as the response says: the model id served (a dated snapshot of the one
    asked, or another behind an alias), the backend's fingerprint, and the tokens billed
    (reasoning tokens are part of the completion tokens)."""
    usage = response.get("usage") or {}
    details = usage.get("completion_tokens_details") or {}
    return {"served_model": response.get("model"),
            "system_fingerprint": response.get("system_fingerprint"),
            "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": usage.get("completion_tokens"),
            "reasoning_tokens": details.get("reasoning_tokens")}


def _cannot_connect(exc: BaseException) -> bool:
    """Whether a connection error is one of not connecting at all (refused, or a host name
    that does not resolve), unlike a connection dropped once made."""
    cause = exc.__cause__
    while cause is not None:
        if type(cause).__name__ == "ConnectError":
            return True
        cause = cause.__cause__
    return False


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with every secret replaced by ``***`` (longest first)."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text
