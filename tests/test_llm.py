"""LLM forecasters through the real openai client against a loopback server."""

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from finbench.data.synth import CANARY_MARK
from finbench.runner import run
from finbench.tracks.intraday.prompt import PromptSettings
from tests.helpers import cli
from tests.llm_server import ChatServer

KEY = "sk-finbench-test-DISTINCTIVE-8c1f"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("FINBENCH_TEST_KEY", KEY)
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))


def config(tmp_path, sample_store, base_url, models, *, start="2025-01-15", end="2025-01-15",
           tickers=("AAPL",), extra="", timeouts=None):
    """``timeouts``: seconds per model name; every other model gets a generous 20 s, so that
    only a model meant to time out does, however loaded the machine (a 0.5 s attempt given
    up under load made a row no test expected)."""
    blocks = []
    for name, model in models:
        timeout = (timeouts or {}).get(name, 20)
        blocks.append(f'[[models]]\nname = "{name}"\nkind = "openai"\nmodel = "{model}"\n'
                      f'base_url = "{base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n'
                      f'timeout = {timeout}\nmax_retries = 2\n{extra}')
    text = (f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = {list(tickers)!r}\n'
            f'start = "{start}"\nend = "{end}"\n[[models]]\nname = "coin"\nkind = "coin"\n'
            + "\n".join(blocks))
    path = tmp_path / "cfg.toml"
    path.write_text(text.replace("'", '"'))
    return path


BEHAVIOURS = [  # (model, valid, error fragment, requests per call)
    ("valid", True, None, 1),
    ("p13", False, "p_up", 1),
    ("inverted", False, "lower 0.02 is above upper -0.02", 1),
    ("nan", False, "finite", 1),
    ("extra", False, "confidence: extra field", 1),
    ("hugeint", False, "lower: beyond the float range", 1),
    ("twice", False, "p_up: given twice", 1),
    ("parts", True, None, 1),  # content as parts: the text part is the answer
    ("badusage", True, None, 1),  # usage that is no object: no tokens counted
    # a 200 that is no chat completion ended the run; now a call without answer
    ("html", False, "api_error: the answer is no JSON object (a text)", 1),
    ("badmessage", False, "api_error: choices[0].message is a text, not an object", 1),
    ("numbercontent", False, "api_error: choices[0].message.content is a number, not text", 1),
    ("notjson", False, "not_json", 1),
    ("refusal", False, "refusal: I can't help.", 1),
    ("length", False, "truncated: finish_reason=length", 1),
    ("ratelimit", True, None, 2),
    ("flaky500", True, None, 3),
    ("hang", False, "timeout", 3),
    ("drop", False, "connection", 3),
]


@pytest.mark.slow
def test_every_scripted_behaviour_ends_in_the_forecast_table(tmp_path, sample_store, server):
    cfg = config(tmp_path, sample_store, server.base_url, [(m, m) for m, *_ in BEHAVIOURS],
                 timeouts={"hang": 0.5})
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    f = pd.read_parquet(out / "forecasts.parquet")
    for model, valid, fragment, per_call in BEHAVIOURS:
        rows = f[f["model"] == model]
        assert len(rows) == 3, model
        assert rows["valid"].all() == valid and (~rows["valid"]).all() == (not valid), (
            model, rows[["error", "detail"]].to_dict("records"))
        if fragment:
            assert rows["error"].str.contains(fragment, regex=False).all(), (model, rows["error"])
        if model in ("notjson", "nan", "extra", "length"):
            assert (rows["raw"] != "").all(), model  # raw text kept
        if fragment and fragment.startswith("api_error"):  # asked again by the next run
            assert (rows["answer_status"] == "error").all(), model
        counts = [c for (m, _), c in server.counts.items() if m == model]
        assert sorted(counts) == [per_call] * 3, (model, counts)
    # "hang" answers validly after 3 s: its rows are invalid timeouts only because every
    # attempt was given up at the configured 0.5 s (how long the run took is the benchmarks'
    # business: bench_llm.py)
    valid = f[f["model"] == "valid"].iloc[0]
    assert valid["p_up"] == 0.6 and valid["tokens"] == 120
    assert json.loads(valid["detail"])["template"] == "finbench-prompt-v2"
    fmt = [r["response_format"] for r in server.requests if r["model"] == "valid"][0]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True


def test_a_response_cache_that_is_no_database_is_named(tmp_path, sample_store, server,
                                                        monkeypatch):
    """A damaged cache file (or a cache folder that is a file) ended the run in sqlite's
    DatabaseError or a FileExistsError traceback."""
    from finbench.core.errors import RunError

    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "responses.sqlite").write_text("not a database, not at all" * 10)
    (tmp_path / "afile").write_text("")
    cfg = config(tmp_path, sample_store, server.base_url, [("m", "valid")])
    for folder, said in (("bad", "file is not a database"), ("afile", "File exists")):
        monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / folder))
        with pytest.raises(RunError, match=rf"{tmp_path / folder}/responses.sqlite: the response "
                                           rf"cache cannot be opened \(.*{said}"):
            run(cfg, tmp_path / f"out-{folder}", echo=lambda *_: None)
    assert server.total == 0


def test_content_parts_pass_the_audit_and_damaged_transcripts_are_a_violation(
        tmp_path, sample_store, server):
    """The audit read a transcript's content parts as a list, so every row of such a model
    'differs from the row's raw text'; a damaged transcripts.sqlite ended the audit, show
    and report in sqlite's DatabaseError."""
    import gc

    from finbench.audit import audit_run
    from finbench.core.errors import RunError
    from finbench.reports.show import show

    cfg = config(tmp_path, sample_store, server.base_url, [("m", "parts")])
    gc.disable()  # the run closes its transcripts itself, not a collection of its objects
    try:
        out = run(cfg, tmp_path / "out", echo=lambda *_: None)
        left = list(out.glob("transcripts.sqlite-*"))
    finally:
        gc.enable()
    rows = pd.read_parquet(out / "forecasts.parquet").query("model == 'm'")
    assert rows["valid"].all() and (rows["p_up"] == 0.6).all()
    assert audit_run(out, echo=lambda *_: None) == []
    # the run closed its transcripts: no write-ahead log is left beside the file (SQLite
    # would read the latest pages from it, whatever the file holds)
    assert left == []
    (out / "transcripts.sqlite").write_bytes(b"not a database " * 100)
    said = f"{out / 'transcripts.sqlite'}: cannot be read as the run's transcripts"
    problems = audit_run(out, echo=lambda *_: None)
    assert any(p.startswith(said) for p in problems), problems
    with pytest.raises(RunError, match=said):
        show(out, "AAPL|2025-01-15|MORNING")


def test_text_mode_extracts_the_json_object(tmp_path, sample_store, server):
    cfg = config(tmp_path, sample_store, server.base_url, [("prose", "prose")],
                 extra='structured = "text"\n')
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    f = pd.read_parquet(out / "forecasts.parquet")
    rows = f[f["model"] == "prose"]
    assert rows["valid"].all() and (rows["p_up"] == 0.55).all()
    assert all(r["response_format"] is None for r in server.requests)


def _open_cache_at_the_barrier(path: str, barrier, said) -> None:
    from finbench.forecasters.cache import ResponseCache

    barrier.wait()
    try:
        cache = ResponseCache(Path(path))
        cache.put(f"k{os.getpid()}", {"pid": os.getpid()})
        cache.close()
        said.put("opened")
    except Exception as exc:  # noqa: BLE001 - reported to the test
        said.put(f"{type(exc).__name__}: {exc}")


def test_processes_opening_a_new_response_cache_at_once_all_open_it(tmp_path):
    """Shards on a cluster's workers (or two runs) starting together open one new cache
    file at once. Its first opening converts it to WAL under an exclusive lock, and SQLite
    refused all but one of the processes converting it at once (without waiting: RunError
    "database is locked", in about one round of three processes in three). Each round: three
    processes released together on a new file; every one opens it and its entry is kept."""
    import multiprocessing

    from finbench.forecasters.cache import ResponseCache

    context = multiprocessing.get_context("fork")
    for round_ in range(20):
        path = tmp_path / f"cache{round_}" / "responses.sqlite"
        barrier, said = context.Barrier(3), context.Queue()
        workers = [context.Process(target=_open_cache_at_the_barrier,
                                   args=(str(path), barrier, said)) for _ in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert [said.get(timeout=10) for _ in workers] == ["opened"] * 3, round_
        cache = ResponseCache(path)
        assert sorted(cache.get(f"k{w.pid}")["pid"] for w in workers) == sorted(
            w.pid for w in workers)
        cache.close()


def test_a_held_cache_entry_is_found_at_once_and_written_together_or_on_close(
        tmp_path, monkeypatch):
    """Answers journalled at once are cached in one transaction a second (or 256 answers);
    this process finds them meanwhile, another only once written; close writes what waits.
    Any other answer (an agent's turn, which the cache alone keeps) is written at once."""
    import sqlite3

    import finbench.forecasters.cache as cache_module
    from finbench.forecasters.cache import ResponseCache

    path = tmp_path / "c.sqlite"

    def on_disk() -> set[str]:
        with sqlite3.connect(path) as other:
            return {k for (k,) in other.execute("SELECT key FROM responses")}

    cache = ResponseCache(path)
    cache.put("turn", {"a": 1})
    assert on_disk() == {"turn"}
    cache.put("answer", {"a": 2}, held=True)
    assert cache.get("answer") == {"a": 2} and on_disk() == {"turn"}
    cache.put("other", {"a": 3})  # a write takes what waits along
    assert on_disk() == {"turn", "answer", "other"}
    cache.put("late", {"a": 4}, held=True)
    cache.close()
    assert on_disk() == {"turn", "answer", "other", "late"}
    monkeypatch.setattr(cache_module, "FLUSH_ENTRIES", 3)
    cache = ResponseCache(path)
    for k in range(3):
        cache.put(f"k{k}", {"a": k}, held=True)
    assert {"k0", "k1", "k2"} <= on_disk()
    cache.close()
    again = ResponseCache(path)
    assert again.get("k1") == {"a": 1}
    again.close()


def test_cache_makes_a_second_run_free_and_audit_rederives_prompts(tmp_path, sample_store,
                                                                   server):
    cfg = config(tmp_path, sample_store, server.base_url, [("m", "valid")])
    run(cfg, tmp_path / "a", echo=lambda *_: None)
    before = server.total
    assert before == 3
    run(cfg, tmp_path / "b", echo=lambda *_: None)
    assert server.total == before  # zero requests
    from finbench.audit import audit_run

    assert audit_run(tmp_path / "b") == []


def test_missing_key_skips_the_model_and_the_run_goes_on(tmp_path, sample_store, server,
                                                         monkeypatch):
    monkeypatch.delenv("FINBENCH_TEST_KEY")
    cfg = config(tmp_path, sample_store, server.base_url, [("m", "valid")])
    lines = []
    out = run(cfg, tmp_path / "out", echo=lines.append)
    assert any("skip m: API key variable FINBENCH_TEST_KEY is not set" in x for x in lines)
    assert set(pd.read_parquet(out / "forecasts.parquet")["model"]) == {"coin"}
    assert server.total == 0


def written(*roots: Path) -> list[Path]:
    return [p for root in roots for p in Path(root).rglob("*") if p.is_file()]


def test_key_is_written_nowhere_even_when_the_server_echoes_it(tmp_path, sample_store, server):
    """A server that echoed the key inside a normal answer got it stored in the journal,
    forecasts.parquet and the response cache."""
    cfg = config(tmp_path, sample_store, server.base_url,
                 [("m", "valid"), ("d", "drop"), ("e", "echo")])
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    assert any(KEY in r["auth"] for r in server.requests)  # it was sent...
    for path in written(out, tmp_path / "cache"):
        assert KEY.encode() not in path.read_bytes(), path  # ...and never stored
    from finbench.runlog.transcripts import Transcripts

    kept = Transcripts(out).last_of_each("e")  # compressed: read back to look inside
    assert len(kept) == 3 and all(KEY not in json.dumps(t) for t in kept.values())
    assert all("auth=Bearer ***" in t["response"]["body"]["choices"][0]["message"]["content"]
               for t in kept.values())
    echoed = pd.read_parquet(out / "forecasts.parquet").query("model == 'e'")
    assert echoed["valid"].all() and echoed["rationale"].str.contains(r"auth=Bearer \*\*\*").all()
    from finbench.audit import audit_run

    assert audit_run(out) == []  # the scrubbed raw text is what the answer was read from


def test_credentials_in_a_base_url_are_refused_or_allowed_and_scrubbed(tmp_path, sample_store,
                                                                       server, monkeypatch):
    from finbench.core.errors import ConfigError
    from finbench.tracks.configs import load_config

    host = server.base_url.split("//", 1)[1]
    secret_url = f"http://researcher:pw-S3cret-77@{host}"
    cfg = config(tmp_path, sample_store, secret_url, [("e", "echo")])
    with pytest.raises(ConfigError, match=r"models.1.openai.base_url|base_url holds credentials"):
        load_config(cfg)
    text = config(tmp_path, sample_store, server.base_url, [("e", "echo")]).read_text()
    text = text.replace(f'base_url = "{server.base_url}"', 'base_url_env = "FINBENCH_TEST_URL"')
    (tmp_path / "cfg.toml").write_text(text)
    monkeypatch.setenv("FINBENCH_TEST_URL", secret_url)
    with pytest.raises(ConfigError, match="holds credentials .* set allow_url_credentials"):
        run(tmp_path / "cfg.toml", tmp_path / "refused", echo=lambda *_: None)
    (tmp_path / "cfg.toml").write_text(text + "allow_url_credentials = true\n")
    out = run(tmp_path / "cfg.toml", tmp_path / "out", echo=lambda *_: None)
    basic = base64.b64encode(b"researcher:pw-S3cret-77")  # how the client sends them
    assert any(basic.decode() in r["auth"] for r in server.requests)
    for path in written(out, tmp_path / "cache"):
        data = path.read_bytes()
        assert b"pw-S3cret-77" not in data and basic not in data and KEY.encode() not in data
    assert pd.read_parquet(out / "forecasts.parquet").query("model == 'e'")["valid"].all()


@pytest.mark.parametrize("url", ["not a url", "ftp://host/v1", "localhost:8000/v1", "https://"])
def test_a_base_url_that_is_no_endpoint_is_refused_before_any_call(tmp_path, sample_store,
                                                                   monkeypatch, url):
    """In the config: a ConfigError naming the key, before the run starts (before, every
    call failed in transport, each retried by the next run). From base_url_env: the same
    rule at model build, naming the variable and not repeating its URL."""
    from finbench.core.errors import ConfigError
    from finbench.tracks.configs import load_config

    cfg = config(tmp_path, sample_store, url, [("e", "echo")])
    with pytest.raises(ConfigError, match=r"key 'models.1.openai': Value error, base_url "
                                          r".* is not an http\(s\) URL with a host"):
        load_config(cfg)
    text = cfg.read_text().replace(f'base_url = "{url}"', 'base_url_env = "FINBENCH_TEST_URL"')
    cfg.write_text(text)
    monkeypatch.setenv("FINBENCH_TEST_URL", url)
    with pytest.raises(ConfigError, match="the URL in FINBENCH_TEST_URL is not an http"):
        run(cfg, tmp_path / "out", echo=lambda *_: None)


def test_streamed_journal_lines_are_fsynced_within_a_second_and_on_flush(tmp_path,
                                                                         monkeypatch):
    """The README promised fsynced lines while LLM answers were written with sync=False."""
    import finbench.runlog.journal as journal_module
    from finbench.runlog.journal import Journal

    clock, synced = [100.0], []
    monkeypatch.setattr(journal_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(journal_module.os, "fsync", lambda fd: synced.append(clock[0]))
    journal = Journal(tmp_path)
    record = {"task_id": "t", "model": "m", "valid": True}
    for at in (100.0, 100.5, 101.2, 101.5):  # one line every half second or so
        clock[0] = at
        journal.append_records([record], sync=False)
    assert synced == [101.2]  # a second after the last fsync, with the line that came then
    clock[0] = 101.6
    journal.flush()  # the line of 101.5 is fsynced when the journal is flushed
    assert synced == [101.2, 101.6]
    journal.flush()
    assert synced == [101.2, 101.6]  # nothing new: no fsync


def test_dry_run_prints_calls_tokens_and_cost_and_makes_no_request(tmp_path, sample_store,
                                                                   server):
    cfg = config(tmp_path, sample_store, server.base_url, [("m", "valid")],
                 extra="price_input_per_1m = 0.15\nprice_output_per_1m = 0.6\n")
    lines = []
    run(cfg, tmp_path / "out", echo=lines.append, dry_run=True)
    line = next(x for x in lines if x.startswith("dry run m:"))
    assert "3 calls" in line and "estimated cost $" in line
    assert server.total == 0


@pytest.mark.slow
def test_sigkilled_run_resumes_exactly_once(tmp_path, sample_store):
    slow = ChatServer(delay=0.15)
    try:
        cfg = config(tmp_path, sample_store, slow.base_url, [("m", "valid")],
                     start="2025-01-13", end="2025-01-15", tickers=("AAPL", "MSFT", "NVDA"),
                     extra="concurrency = 2\n")
        out = tmp_path / "out"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-m", "finbench", "run", str(cfg), "--out",
                                 str(out)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        journal = out / "journal.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if journal.is_file() and sum(
                    1 for x in journal.read_text().splitlines() if '"model": "m"' in x) >= 6:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        finished = [json.loads(x) for x in journal.read_text().splitlines()
                    if x.endswith("}") and '"model": "m"' in x]
        assert 6 <= len(finished) < 27
        run(cfg, out, echo=lambda *_: None)
        f = pd.read_parquet(out / "forecasts.parquet")
        assert len(f[f["model"] == "m"]) == 27 and not f.duplicated(["task_id", "model"]).any()
        for rec in finished:  # no finished call was requested a second time
            assert slow.counts[("valid", rec["input_sha256"])] == 1, rec["task_id"]
        assert set(f.loc[f["model"] == "m", "input_sha256"]) == {
            p for (mdl, p) in slow.counts if mdl == "valid"}
        assert slow.total <= 27 + 2  # only the calls in flight at the kill were repeated
    finally:
        slow.close()


@pytest.mark.slow
def test_no_prompt_holds_a_canary_published_after_its_horizon(sample_store):
    from finbench.data.store import Store
    from finbench.tracks.intraday.config import TasksConfig
    from finbench.tracks.intraday.gate import ContextIndex
    from finbench.tracks.intraday.tasks import build_tasks

    store = Store(sample_store)
    tasks = build_tasks(TasksConfig(tickers=["AAPL", "MSFT", "NVDA"], start="2024-09-20",
                                    end="2025-01-15")).tasks
    news = store.read_headlines()
    canaries = news[news["headline"].str.contains(CANARY_MARK)]
    index = ContextIndex(tasks, store.read_bar_arrays(), news, previous_sessions=5,
                         headline_hours=24, max_headlines=20)
    seen = 0
    for i, messages in enumerate(PromptSettings().messages(index)):
        ctx = index.context(i)
        text = "\n".join(m["content"] for m in messages)
        late = canaries[canaries["available_at"] > ctx.t_forecast]
        for headline in late["headline"]:
            assert json.dumps(headline)[1:-1] not in text, ctx.task_id
        seen += text.count(CANARY_MARK)
    assert seen > 0


def test_the_prompt_states_the_runs_target_and_alpha_and_a_shifted_target(sample_store):
    """With early_close = "shift" the 2024-12-24 target is 12:55; the prompt once said 15:55
    and alpha = 0.2 whatever the config."""
    from finbench.data.store import Store
    from finbench.tracks.intraday.config import TasksConfig
    from finbench.tracks.intraday.gate import ContextIndex
    from finbench.tracks.intraday.prompt import PromptSettings
    from finbench.tracks.intraday.tasks import build_tasks

    spec = TasksConfig(tickers=["AAPL"], start="2024-12-23", end="2024-12-24",
                       horizons={"MORNING": "09:30"}, early_close="shift")
    tasks = build_tasks(spec).tasks
    store = Store(sample_store)
    index = ContextIndex(tasks, store.read_bar_arrays(), store.read_headlines(),
                         previous_sessions=5, headline_hours=24, max_headlines=20)
    settings = PromptSettings(target="15:55", alpha=0.1)
    full, shifted = settings.messages(index)
    for system, _ in (full, shifted):
        assert "(15:55 ET today, earlier when the session closes early" in system["content"]
        assert "90% prediction interval" in system["content"]
        assert "alpha = 0.1)" in system["content"]
        assert "15:55 ET" not in system["content"].replace("(15:55 ET today", "")
        assert "0.2" not in system["content"] and "80%" not in system["content"]
    assert "Target time: 15:55 ET\n" in full[1]["content"]
    assert ("Target time: 12:55 ET (moved from 15:55 ET: the session closes early)"
            in shifted[1]["content"])
    assert "mid price at 12:55 ET" in shifted[1]["content"]
    assert "a 90% interval" in shifted[1]["content"] and "80%" not in shifted[1]["content"]


def test_batch_mode_submits_once_polls_and_collects(tmp_path, sample_store, server):
    cfg = config(tmp_path, sample_store, server.base_url, [("b", "mixed")])
    out = tmp_path / "out"
    lines = []
    run(cfg, out, echo=lines.append, batch=True)
    state = json.loads((out / "batches" / "b.json").read_text())
    assert state["files"][0]["batch_id"] == "batch-1" and state["files"][0]["requests"] == 3
    assert server.batch_calls == {"upload": 1, "create": 1}
    assert not (out / "forecasts.parquet").exists() and server.total == 0
    run(cfg, out, echo=lines.append)  # first poll: in progress
    assert any("batch batch-1 is in_progress" in x for x in lines)
    assert not (out / "forecasts.parquet").exists()
    run(cfg, out, echo=lines.append)  # second poll: completed and collected
    f = pd.read_parquet(out / "forecasts.parquet")
    b = f[f["model"] == "b"].set_index("task_id")
    assert len(b) == 3 and b["valid"].sum() == 2
    failed = b.loc["AAPL|2025-01-15|MIDDAY"]
    assert not failed["valid"] and "batch_error: http_400: context too long" in failed["error"]
    assert json.loads(b["detail"].iloc[0])["batch_id"] == "batch-1"
    calls = dict(server.batch_calls)
    run(cfg, out, echo=lambda *_: None, batch=True)  # nothing left to send or collect
    assert dict(server.batch_calls) == calls and server.total == 0
    from finbench.audit import audit_run

    assert audit_run(out) == []


@pytest.mark.parametrize("damage, rule", [
    (b"not json", "line 4: is no JSON;"),
    (b"[1, 2]", "line 4: is no JSON object;"),
    (b'{"custom_id": "AAPL|2025-01-15|NOPE", "response": null}',
     "line 4: custom_id 'AAPL|2025-01-15|NOPE' is no request of this batch;"),
    (b'{"custom_id": "AAPL|2025-01-15|MORNING", "response": null}',
     "line 4: custom_id 'AAPL|2025-01-15|MORNING' is answered twice;"),
    ({"response": "ok"}, "line 1: response is no JSON object;"),
    ({"error": 5}, "line 1: error is no JSON object;"),
])
def test_a_damaged_batch_result_file_stops_the_model_and_is_read_again(
        tmp_path, sample_store, server, damage, rule):
    cfg = config(tmp_path, sample_store, server.base_url, [("b", "valid")])
    out = tmp_path / "out"
    run(cfg, out, echo=lambda *_: None, batch=True)
    good = server.files["file-out-batch-1"]
    first, *rest = good.splitlines()
    assert len(rest) == 2 and json.loads(first)["custom_id"] == "AAPL|2025-01-15|MORNING"
    if isinstance(damage, bytes):  # a line more
        damaged = good + damage + b"\n"
    else:                          # the first line's field replaced
        damaged = b"\n".join([json.dumps({**json.loads(first), **damage}).encode(), *rest])
    server.files["file-out-batch-1"] = damaged
    run(cfg, out, echo=lambda *_: None)  # in progress
    lines = []
    run(cfg, out, echo=lines.append)     # completed: its result file is read and refused
    stopped = {x for x in lines if x.startswith("STOPPED")}  # said when met and at the end
    assert len(stopped) == 1
    stopped = stopped.pop()
    assert "the Batch API's result file file-out-batch-1" in stopped
    assert rule in stopped
    assert not (out / "journal").exists() or not any((out / "journal").iterdir())
    state = json.loads((out / "batches" / "b.json").read_text())
    assert not state["files"][0].get("collected")
    server.files["file-out-batch-1"] = good  # the provider's file read whole next time
    run(cfg, out, echo=lambda *_: None)
    f = pd.read_parquet(out / "forecasts.parquet")
    assert len(f[f["model"] == "b"]) == 3 and f[f["model"] == "b"]["valid"].all()
    assert server.batch_calls["upload"] == 1 and server.batch_calls["create"] == 1


def test_a_batch_run_killed_after_upload_creates_the_batch_once(tmp_path, sample_store, server):
    from finbench.forecasters.batch import BatchJob

    cfg = config(tmp_path, sample_store, server.base_url, [("b", "valid")])
    out = tmp_path / "out"
    original = BatchJob.submit

    def upload_only(self, echo=print):  # simulate a kill between upload and batch creation
        client = self.client()
        for entry in self.pending():
            data = (self.folder / entry["path"]).read_bytes()
            entry["input_file_id"] = client.files.create(file=(entry["path"], data),
                                                         purpose="batch").id
            self._save()

    BatchJob.submit = upload_only
    try:
        run(cfg, out, echo=lambda *_: None, batch=True)
    finally:
        BatchJob.submit = original
    assert server.batch_calls == {"upload": 1}
    for _ in range(3):
        run(cfg, out, echo=lambda *_: None)
    assert server.batch_calls["upload"] == 1 and server.batch_calls["create"] == 1
    f = pd.read_parquet(out / "forecasts.parquet")
    assert f[f["model"] == "b"]["valid"].all()


@pytest.mark.parametrize("behaviour, why", [
    ("unauthorized", "http_401: Incorrect API key provided: sk-****. You can find your API key "
                     "at https://platform.openai.com/account/api-keys. (the API key is rejected)"),
    ("forbidden", "http_403: You are not allowed to use this model. (the key may not use this "
                  "model)"),
    ("nomodel", "http_404: The model `nomodel` does not exist or you do not have access to it. "
                "(no such model or endpoint path)"),
])
def test_a_rejected_key_or_model_stops_that_model_at_its_first_call(tmp_path, sample_store,
                                                                     server, behaviour, why):
    """A 401/403 turned every task into an invalid row and the run exited 0."""
    cfg = config(tmp_path, sample_store, server.base_url, [("bad", behaviour), ("good", "valid")],
                 tickers=("AAPL", "MSFT"), extra="concurrency = 1\n")
    result = cli("run", cfg, "--out", tmp_path / "out")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"ModelStopped: bad: stopped at the first call that cannot succeed: {why}" \
        in result.stderr
    assert sum(n for (model, _), n in server.counts.items() if model == behaviour) == 1
    lines = [json.loads(x) for x in (tmp_path / "out" / "journal.jsonl").read_text().splitlines()]
    assert {x["model"] for x in lines} == {"good"} and len(lines) == 6  # nothing of "bad"
    f = pd.read_parquet(tmp_path / "out" / "forecasts.parquet")
    assert f.groupby("model").size().to_dict() == {"coin": 6, "good": 6}
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["skipped_models"]["bad"].startswith("stopped: bad: stopped at the first")
    from finbench.audit import audit_run

    assert audit_run(tmp_path / "out") == []


def test_an_unreachable_endpoint_stops_that_model(tmp_path, sample_store):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    cfg = config(tmp_path, sample_store, f"http://127.0.0.1:{closed}/v1", [("lost", "valid")],
                 extra="concurrency = 1\n").read_text().replace("max_retries = 2",
                                                                 "max_retries = 0")
    (tmp_path / "cfg.toml").write_text(cfg)
    said = []
    out = run(tmp_path / "cfg.toml", tmp_path / "out", echo=said.append)
    assert any(x.startswith("STOPPED lost: stopped at the first call that cannot succeed: the "
                            "endpoint cannot be reached (connection: ") for x in said)
    assert not (out / "journal.jsonl").exists()
    assert pd.read_parquet(out / "forecasts.parquet")["model"].unique().tolist() == ["coin"]


def test_the_rate_spacing_holds_across_a_models_context_chunks(tmp_path, sample_store, server):
    """A model is called a context chunk (a month of tasks) at a time, each in an event loop
    of its own, and each made a new RateLimiter: the first request of a month started at once,
    however soon after the last of the month before. The spacing now holds across them."""
    cfg = config(tmp_path, sample_store, server.base_url, [("m", "valid")],
                 start="2024-12-31", end="2025-01-02",
                 extra="concurrency = 1\nrequests_per_minute = 120\n")  # one each 0.5 s
    run(cfg, tmp_path / "out", echo=lambda *_: None)
    at = sorted(r["at"] for r in server.requests)
    assert len(at) == 6  # 3 tasks in December, 3 in January: two chunks
    assert min(b - a for a, b in zip(at, at[1:], strict=False)) >= 0.3  # 0.5 s, less jitter


@pytest.mark.parametrize("proxy", [None, "http://127.0.0.1:9"])
def test_every_client_of_a_process_shares_one_tls_context(tmp_path, sample_store, server,
                                                          monkeypatch, proxy):
    """Making a TLS context reads the certificate store (about 20 ms); the engine made one
    per client (a model's concurrency over 8) in every context chunk. Now the process makes
    one, the way the client would (so ``SSL_CERT_FILE`` still counts), and every client and
    its aiohttp transport hold that one: a client a chunk. Where the environment names a
    proxy (here for https only: the server is http), the clients keep their default
    transport, which honours it, a client for each 8 of the model's concurrency."""
    import httpx2
    import openai

    from finbench.forecasters import llm
    from finbench.forecasters.transport import AiohttpTransport

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    if proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy)
    made, pools = [], []
    real = httpx2.create_ssl_context
    monkeypatch.setattr(httpx2, "create_ssl_context",
                        lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    llm.tls_context.cache_clear()
    monkeypatch.setattr(openai, "DefaultAsyncHttpxClient", lambda **k: pools.append(
        (k["verify"], k["transport"])) or openai._base_client.AsyncHttpxClientWrapper(**k))
    cfg = config(tmp_path, sample_store, server.base_url, [("m", "valid")],
                 start="2024-12-31", end="2025-01-02", extra="concurrency = 20\n")
    try:
        run(cfg, tmp_path / "out", echo=lambda *_: None)
    finally:
        llm.tls_context.cache_clear()
    assert len(server.requests) == 6  # two chunks (December, January)
    assert len(made) == 1 and all(verify is made[0] for verify, _ in pools)
    if proxy:
        assert len(pools) == 6 and all(transport is None for _, transport in pools)
    else:
        assert len(pools) == 2
        assert all(isinstance(t, AiohttpTransport) and t._ssl is made[0] for _, t in pools)


def _cached_second_run(tmp_path, sample_store, server):
    """A config of 9 tasks whose answers a first run has cached."""
    cfg = config(tmp_path, sample_store, server.base_url, [("m", "valid")],
                 start="2025-01-13", end="2025-01-15")
    run(cfg, tmp_path / "a", echo=lambda *_: None)
    assert server.total == 9
    return cfg


def test_answers_of_one_turn_are_journalled_in_one_write_transcripts_first(
        tmp_path, sample_store, server, monkeypatch):
    """Each answer was one SQLite transaction and one journal write (0.2 ms of the engine's
    0.5 ms a call). The answers that arrive in one turn of the event loop (here all nine,
    from the cache) are now one write of each, the transcripts first."""
    from finbench.runlog.journal import Journal

    cfg = _cached_second_run(tmp_path, sample_store, server)
    writes, real = [], Journal.append_records

    def counted(self, records, **kwargs):
        if any(r["model"] == "m" for r in records):
            writes.append((len(records), len(kwargs.get("transcripts") or [])))
        return real(self, records, **kwargs)

    monkeypatch.setattr(Journal, "append_records", counted)
    out = run(cfg, tmp_path / "b", echo=lambda *_: None)
    assert server.total == 9  # no request: every answer from the cache
    assert writes == [(9, 9)]
    f = pd.read_parquet(out / "forecasts.parquet")
    assert (f["model"] == "m").sum() == 9
    from finbench.runlog.transcripts import Transcripts

    assert len(Transcripts(out).last_of_each("m")) == 9


def test_answers_waiting_for_their_turn_are_journalled_when_the_run_is_stopped(
        tmp_path, sample_store, server, monkeypatch):
    """An answer kept waits for the others of its turn; a run stopped meanwhile (Ctrl-C
    cancels the event loop's tasks) still journals it, with its transcript."""
    import asyncio

    cfg = _cached_second_run(tmp_path, sample_store, server)
    real = asyncio.sleep

    async def stopped(delay, *args, **kwargs):
        if delay == 0:  # the wait for the turn's other answers: cancelled there
            raise asyncio.CancelledError
        return await real(delay, *args, **kwargs)

    monkeypatch.setattr(asyncio, "sleep", stopped)
    out = tmp_path / "b"
    with pytest.raises((asyncio.CancelledError, KeyboardInterrupt)):
        run(cfg, out, echo=lambda *_: None)
    lines = [json.loads(x) for x in (out / "journal.jsonl").read_text().splitlines()]
    kept = {r["task_id"] for r in lines if r["model"] == "m"}
    from finbench.runlog.transcripts import Transcripts

    assert len(kept) >= 1
    assert set(Transcripts(out).last_of_each("m")) == kept
