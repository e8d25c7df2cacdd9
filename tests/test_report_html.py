"""report.html of the pilot in a real headless browser (Debian's chromium driven by Playwright):
it loads without console errors, the leaderboard has the run's models, a filter changes what
the sample browser shows, and a sample shows its prompt as sent. Skipped, with why, where no
browser or no Playwright is installed (`.ci/run` installs the browser)."""

import os
import shutil
from pathlib import Path

import pytest

from finbench.reports.build import report
from finbench.runner import run
from tests.llm_server import ChatServer

ROOT = Path(__file__).resolve().parents[1]
BROWSER = os.environ.get("FINBENCH_CHROMIUM") or shutil.which("chromium") or shutil.which(
    "chromium-browser")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def pilot_html(tmp_path_factory):
    """The pilot config as shipped, its open models answered by a loopback server."""
    tmp = tmp_path_factory.mktemp("html")
    server = ChatServer()
    saved = dict(os.environ)
    os.environ.update(FINBENCH_OPEN_BASE_URL=server.base_url, FINBENCH_OPEN_API_KEY="sk-test",
                      FINBENCH_CACHE_DIR=str(tmp / "cache"))
    for key in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY"):
        os.environ.pop(key, None)
    try:
        out = run(ROOT / "configs" / "pilot.toml", tmp / "pilot", echo=lambda *_: None)
        report(out)
        yield out / "report.html"
    finally:
        os.environ.clear()
        os.environ.update(saved)
        server.close()


def test_the_page_is_self_contained(pilot_html):
    text = pilot_html.read_text()
    assert "http://" not in text.replace("http://www.w3.org", "") and "https://" not in text
    assert "<img" in text and "data:image/png;base64," in text
    assert 'id="table-scores_aggregate"' in text and "SYNTHETIC" in text


def test_the_report_opens_in_a_browser_and_its_filter_works(pilot_html, tmp_path):
    if BROWSER is None:
        pytest.skip("no chromium installed (Debian: apt-get install chromium; .ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="Playwright is not installed (pip install playwright)")
    problems = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=BROWSER, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 2000})
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(pilot_html.as_uri())
        leaderboard = page.inner_text("#table-scores_aggregate")
        models = ["coin", "base_rate", "momentum", "climatology", "Llama 3.1 70B",
                  "Llama 3.3 70B Instruct", "Qwen2.5 72B"]
        assert all(m in leaderboard for m in models), leaderboard
        total = page.locator("#sample-list tbody tr").count()
        assert total == 7 * 9 and page.inner_text("#count") == "63 of 63 samples"
        page.select_option("select[name=model]", "Llama 3.3 70B Instruct")
        listed = page.locator("#sample-list tbody tr")
        assert listed.count() == 9 and page.inner_text("#count") == "9 of 63 samples"
        assert set(listed.evaluate_all("rs => rs.map(r => r.dataset.model)")) == {
            "Llama 3.3 70B Instruct"}
        page.select_option("select[name=outcome]", "up")
        ups = listed.count()
        assert 0 < ups < 9
        listed.first.click()
        shown = page.inner_text("#detail")
        assert "[system]" in shown and "[user]" in shown and "outcome up" in shown
        assert "Brier" in shown and "Ticker:" in shown
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot: {shot}")
        browser.close()
    assert shot.stat().st_size > 10_000
    assert problems == []


def test_a_large_run_embeds_its_first_rows_and_says_so(pilot_html, monkeypatch):
    import json
    import re

    import finbench.tracks.intraday.page as page

    monkeypatch.setattr(page, "MAX_SAMPLES", 10)
    report(pilot_html.parent)
    text = pilot_html.read_text()
    data = json.loads(re.search(r'id="sample-data">(.*?)</script>', text, re.S).group(1))
    forecasts = __import__("pandas").read_parquet(pilot_html.parent / "forecasts.parquet")
    assert [(r["task"], r["model"]) for r in data] == list(
        zip(forecasts["task_id"][:10], forecasts["model"][:10], strict=True))
    assert "The first 10 of 63 rows are here." in text
    monkeypatch.undo()
    report(pilot_html.parent)  # the module's page as it was, for any test after this one


def test_a_model_text_holding_script_markup_leaves_the_page_whole(tmp_path, sample_store):
    """A rationale holding "<!--<script>" swallowed the samples' data block and the page's
    script after it (only "</" was escaped): the sample browser stayed empty."""
    if BROWSER is None:
        pytest.skip("no chromium installed (Debian: apt-get install chromium; .ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="Playwright is not installed (pip install playwright)")
    from tests.helpers import aapl_config, scripted_toml

    said = "up <!--<script> then </script> and </p>"
    cfg = aapl_config(tmp_path / "cfg.toml", sample_store, scripted_toml(
        m='{"p_up": 0.6, "lower": -0.01, "upper": 0.01, "rationale": "' + said + '"}'))
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    report(out)
    problems = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=BROWSER, headless=True, args=FLAGS)
        page = browser.new_page()
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto((out / "report.html").as_uri())
        assert page.inner_text("#count") == "3 of 3 samples"
        page.locator("#sample-list tbody tr").first.click()
        assert said in page.inner_text("#detail")
        browser.close()
    assert problems == []


def test_an_agents_sample_shows_its_exchange_turn_by_turn(tmp_path, sample_store, monkeypatch):
    """A scripted agent's row in the sample browser: each call it made (tool and arguments)
    under its turn, each answer under the call it answers; the tables of what tools add."""
    if BROWSER is None:
        pytest.skip("no chromium installed (Debian: apt-get install chromium; .ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="Playwright is not installed (pip install playwright)")
    server = ChatServer()
    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))
    try:
        cfg = tmp_path / "agent.toml"
        cfg.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL"]\n'
                       'start = "2025-01-15"\nend = "2025-01-15"\n[[models]]\nname = "coin"\n'
                       'kind = "coin"\n' + "".join(
                           f'[[models]]\nname = "{name}"\nkind = "openai"\n'
                           f'model = "agent-honest"\nbase_url = "{server.base_url}"\n'
                           f'api_key_env = "FINBENCH_TEST_KEY"\n{tools}'
                           for name, tools in (("agent", 'tools = ["daily", "headlines", '
                                                         '"bars"]\n'), ("plain", ""))))
        out = run(cfg, tmp_path / "run", echo=lambda *_: None)
        report(out)
    finally:
        server.close()
    problems = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=BROWSER, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 2000})
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto((out / "report.html").as_uri())
        assert "agent" in page.inner_text("#table-tools_effect")
        assert "plain" in page.inner_text("#table-tools_effect")
        page.select_option("select[name=model]", "agent")
        page.locator("#sample-list tbody tr").first.click()
        shown = page.inner_text("#detail")
        browser.close()
    assert '-> call_0_0: daily {"ticker": "AAPL", "sessions": 5}' in shown
    assert "[tool answer to call_0_0]" in shown and '"tool":"daily"' in shown
    assert "-> call_1_0: bars" in shown and "[tool answer to call_1_0]" in shown
    assert problems == []
