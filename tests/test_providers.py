"""Every provider config of docs/llm.md, as written, against a loopback server that answers as
that provider does (what it honours, ignores or refuses)."""

import re
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from finbench.runner import run
from tests.llm_server import ChatServer

ROOT = Path(__file__).resolve().parents[1]
FENCE = "`" * 3


def provider_blocks() -> dict[str, str]:
    """The TOML block under each ``###`` heading of the providers section of docs/llm.md."""
    text = (ROOT / "docs" / "llm.md").read_text()
    section = text.split("## OpenAI-compatible providers", 1)[1].split("\n## ", 1)[0]
    blocks = {}
    for part in section.split("\n### ")[1:]:
        heading = part.splitlines()[0]
        found = re.search(FENCE + r"toml\n(.*?)" + FENCE, part, re.DOTALL)
        assert found, f"docs/llm.md: provider {heading!r} has no TOML block"
        blocks[heading] = found.group(1)
    return blocks


BLOCKS = provider_blocks()
PROFILE = {"vLLM": "vllm", "Ollama": "ollama", "Together": "together", "DeepSeek": "deepseek",
           "Gemini (OpenAI-compatible endpoint)": "gemini",
           "Anthropic (OpenAI SDK compatibility)": "anthropic"}


@pytest.fixture(scope="module")
def server():
    s = ChatServer()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))


def test_the_docs_name_every_provider_the_issue_names():
    assert set(BLOCKS) == set(PROFILE)


def provider_config(tmp_path, sample_store, server, block: str, profile: str) -> Path:
    """The documented block as written, but for its URL (the loopback server, answering as
    the provider) and the data (the sample store's pilot day)."""
    entry = tomllib.loads(block)["models"][0]
    root = server.base_url.rsplit("/v1", 1)[0]
    block = block.replace(f'"{entry["base_url"]}"', f'"{root}/{profile}/v1"')
    text = (f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL"]\n'
            f'start = "2025-01-15"\nend = "2025-01-15"\n' + block)
    path = tmp_path / "cfg.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("heading", sorted(PROFILE))
def test_each_documented_provider_config_answers_validly(tmp_path, sample_store, server,
                                                         monkeypatch, heading):
    block, profile = BLOCKS[heading], PROFILE[heading]
    entry = tomllib.loads(block)["models"][0]
    monkeypatch.setenv(entry["api_key_env"], "test-key")
    seen = len(server.requests)
    out = run(provider_config(tmp_path, sample_store, server, block, profile),
              tmp_path / "out", echo=lambda *_: None)
    rows = pd.read_parquet(out / "forecasts.parquet")
    assert len(rows) == 3 and rows["valid"].all(), rows["error"].tolist()
    sent = [r["body"] for r in server.requests[seen:]]
    assert len(sent) == 3 and all(r["provider"] == profile for r in server.requests[seen:])
    for body in sent:
        for key in ("temperature", "seed", "max_tokens", "max_completion_tokens",
                    "reasoning_effort"):
            assert body.get(key) == entry.get(key), key  # sent when given, only then
        assert {k: body[k] for k in entry.get("extra_body", {})} == entry.get("extra_body", {})
        kind = {"json_schema": "json_schema", "json_object": "json_object", "text": None}[
            entry["structured"]]
        assert (body.get("response_format") or {}).get("type") == kind


@pytest.mark.parametrize(("profile", "error"), [
    ("deepseek", "http_400: This response_format type is unavailable now"),
    ("anthropic", "not_json: "),  # prose around the JSON: not a strict-schema answer
])
def test_a_strict_schema_where_the_provider_does_not_honour_it_gives_invalid_rows(
        tmp_path, sample_store, server, monkeypatch, profile, error):
    heading = {v: k for k, v in PROFILE.items()}[profile]
    block = re.sub(r'structured = "\w+"', 'structured = "json_schema"', BLOCKS[heading])
    entry = tomllib.loads(block)["models"][0]
    monkeypatch.setenv(entry["api_key_env"], "test-key")
    out = run(provider_config(tmp_path, sample_store, server, block, profile),
              tmp_path / "out", echo=lambda *_: None)
    rows = pd.read_parquet(out / "forecasts.parquet")
    assert len(rows) == 3 and not rows["valid"].any()
    assert (rows["answer_status"] == "answered").all()  # final: asked again, answered alike
    assert rows["error"].str.contains(error, regex=False).all(), rows["error"].tolist()
