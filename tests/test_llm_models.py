"""Today's models through the loopback server: reasoning models (max_completion_tokens,
reasoning_effort, no temperature), extra_body passed through, what was served recorded."""

import json

import pandas as pd
import pytest

from finbench.audit import audit_run
from finbench.core.errors import ConfigError
from finbench.runner import run
from finbench.tracks.configs import load_config
from tests.test_llm import config

pytestmark = pytest.mark.usefixtures("llm_env")


@pytest.mark.parametrize(("extra", "why"), [
    ("max_tokens = 300\n", "http_400: Unsupported parameter: 'max_tokens' is not supported with "
                           "this model. Use 'max_completion_tokens' instead. (the model refuses "
                           "a parameter of the config: reasoning models take "
                           "max_completion_tokens, not max_tokens)"),
    ("temperature = 0.0\n", "http_400: Unsupported value: 'temperature' does not support 0.0 "
                            "with this model. Only the default (1) value is supported. (the "
                            "model refuses a value of the config: reasoning models accept only "
                            "the default temperature (leave temperature unset))"),
])
def test_a_reasoning_model_refusing_a_parameter_stops_at_its_first_call(
        tmp_path, sample_store, server, extra, why):
    """Every call to a reasoning model with max_tokens failed the same way and each became an
    invalid row: a refused parameter stops the model at once, naming the fix."""
    cfg = config(tmp_path, sample_store, server.base_url, [("o3", "o3")],
                 extra=extra + "concurrency = 1\n")
    said = []
    out = run(cfg, tmp_path / "out", echo=said.append)
    stops = [x for x in said if x.startswith("STOPPED")]
    assert stops and all(x.startswith(f"STOPPED o3: stopped at the first call that cannot "
                                      f"succeed: {why} (") for x in stops), stops
    assert server.total == 1
    assert not (out / "journal.jsonl").exists()
    assert pd.read_parquet(out / "forecasts.parquet")["model"].unique().tolist() == ["coin"]


def test_a_reasoning_model_answers_with_max_completion_tokens_and_effort(tmp_path, sample_store,
                                                                         server):
    cfg = config(tmp_path, sample_store, server.base_url, [("o4", "o4-mini")],
                 extra='max_completion_tokens = 4000\nreasoning_effort = "low"\nseed = 3\n')
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    bodies = [r["body"] for r in server.requests]
    assert len(bodies) == 3
    for body in bodies:
        assert body["max_completion_tokens"] == 4000 and body["reasoning_effort"] == "low"
        assert "max_tokens" not in body and "temperature" not in body and body["seed"] == 3
    rows = pd.read_parquet(out / "forecasts.parquet").query("model == 'o4'")
    assert rows["valid"].all() and (rows["tokens"] == 184).all()
    detail = json.loads(rows["detail"].iloc[0])
    assert detail["served_model"] == "o4-mini-2025-04-16"
    assert detail["system_fingerprint"] == "fp_reasoning"
    assert (detail["prompt_tokens"], detail["completion_tokens"],
            detail["reasoning_tokens"]) == (100, 84, 64)
    assert audit_run(out) == []


def test_extra_body_is_sent_unchanged_and_kept_in_the_manifest(tmp_path, sample_store, server):
    extra = ('[models.extra_body]\nguided_decoding_backend = "xgrammar"\n'
             '[models.extra_body.options]\nnum_ctx = 8192\nstop = ["\\n\\n"]\n')
    cfg = config(tmp_path, sample_store, server.base_url, [("local", "valid")], extra=extra)
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    sent = {"guided_decoding_backend": "xgrammar", "options": {"num_ctx": 8192, "stop": ["\n\n"]}}
    for r in server.requests:
        assert {k: r["body"][k] for k in sent} == sent
        assert r["body"]["response_format"]["type"] == "json_schema"  # FinBench's own keys stay
    manifest = json.loads((out / "manifest.json").read_text())
    model = [m for m in manifest["models"] if m["name"] == "local"][0]
    assert model["extra_body"] == sent


def test_a_changed_extra_body_is_a_different_request_for_the_cache(tmp_path, sample_store, server):
    plain = config(tmp_path, sample_store, server.base_url, [("m", "valid")])
    run(plain, tmp_path / "a", echo=lambda *_: None)
    assert server.total == 3
    run(plain, tmp_path / "b", echo=lambda *_: None)
    assert server.total == 3  # cached: the same request
    extra = config(tmp_path, sample_store, server.base_url, [("m", "valid")],
                   extra="[models.extra_body]\ntop_k = 20\n")
    run(extra, tmp_path / "c", echo=lambda *_: None)
    assert server.total == 6  # another request: not answered from the cache


@pytest.mark.parametrize(("extra", "message"), [
    ("max_tokens = 10\nmax_completion_tokens = 10\n",
     "give max_tokens or max_completion_tokens, not both"),
    ('reasoning_effort = "extreme"\n', "models.1.openai.reasoning_effort"),
    ("[models.extra_body]\ntemperature = 0.5\n",
     "extra_body.temperature: FinBench sets 'temperature' itself; give it as the model's own "
     "key 'temperature'"),
    ("[models.extra_body]\nstream = true\n", "extra_body.stream: FinBench sets 'stream' itself"),
    # the native head's request carried extra_body's, not the recorded top_logprobs
    ("[models.extra_body]\ntop_logprobs = 5\n", "extra_body.top_logprobs: FinBench sets "
     "'top_logprobs' itself; give it as the model's own key 'top_logprobs'"),
    ("[models.extra_body]\nlogprobs = false\n", "extra_body.logprobs: FinBench sets "
     "'logprobs' itself (with head = 'native', the one head that reads them)"),
    ("[models.extra_body]\nresponse_format = {type = 'text'}\n", "FinBench sets "
     "'response_format' itself (from structured and format)"),
    ("[models.extra_body]\nwhen = 2025-01-15T10:00:00Z\n",
     "extra_body is not JSON (Object of type datetime is not JSON serializable); TOML dates"),
])
def test_bad_model_parameters_are_refused_with_the_key(tmp_path, sample_store, extra, message):
    cfg = config(tmp_path, sample_store, "http://127.0.0.1:9/v1", [("m", "o3")], extra=extra)
    with pytest.raises(ConfigError) as info:
        load_config(cfg)
    assert message in str(info.value)


def test_the_readme_model_configs_are_valid(tmp_path, sample_store):
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    part = readme.split("## Language models", 1)[1].split("\n## ", 1)[0]
    block = part.split("`" * 3 + "toml\n", 1)[1].split("`" * 3, 1)[0]
    path = tmp_path / "cfg.toml"
    path.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL"]\n'
                    f'start = "2025-01-15"\nend = "2025-01-15"\n{block}')
    models = load_config(path).models
    assert [m.model for m in models] == ["o4-mini", "meta-llama/Llama-3.3-70B-Instruct"]
    assert models[0].max_completion_tokens == 4000 and models[0].temperature is None
    assert models[1].extra_body == {"top_k": 1}
