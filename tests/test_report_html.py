"""report.html of the pilot in a real headless browser (Debian's chromium driven by Playwright):
it loads without console errors, the leaderboard has the run's models, a filter changes what
the sample browser shows, and a sample shows its prompt as sent. Skipped, with why, where no
browser or no Playwright is installed (`.ci/run` installs the browser)."""

import contextlib
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


@contextlib.contextmanager
def browser_page(height: int = 1200):
    """A page of headless Chromium (1280 wide) and the list its console errors and page
    errors are appended to; skipped, saying why, without the browser or Playwright."""
    if BROWSER is None:
        pytest.skip("no chromium installed (Debian: apt-get install chromium; .ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="Playwright is not installed (pip install playwright)")
    problems: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=BROWSER, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": height})
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        try:
            yield page, problems
        finally:
            browser.close()


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
    with browser_page(2000) as (page, problems):
        page.goto(pilot_html.as_uri())
        leaderboard = page.inner_text("#table-scores_aggregate")
        models = ["coin", "base_rate", "momentum", "climatology", "Llama 3.1 70B",
                  "Llama 3.3 70B Instruct", "Qwen2.5 72B"]
        assert all(m in leaderboard for m in models), leaderboard
        total = page.locator("#sample-list tbody tr").count()
        # the baselines' 9 tasks each; the open models at the paper's horizons (6, 3 and 3)
        assert total == 4 * 9 + 6 + 3 + 3 and page.inner_text("#count") == "48 of 48 samples"
        page.select_option("select[name=model]", "Llama 3.3 70B Instruct")
        listed = page.locator("#sample-list tbody tr")
        assert listed.count() == 3 and page.inner_text("#count") == "3 of 48 samples"
        assert set(listed.evaluate_all("rs => rs.map(r => r.dataset.model)")) == {
            "Llama 3.3 70B Instruct"}
        page.select_option("select[name=outcome]", "up")
        ups = listed.count()
        assert 0 < ups <= 3
        listed.first.click()
        shown = page.inner_text("#detail")
        assert "[system]" in shown and "[user]" in shown and "outcome up" in shown
        assert "Brier" in shown and "Ticker:" in shown
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot: {shot}")
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
    assert "The first 10 of 48 forecast rows, in the run&#39;s order" in text
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


def test_the_header_sorting_and_paging_work_in_a_browser(pilot_html, monkeypatch):
    """The run's header (its FinBench, the snapshot, each model and why one is missing);
    a click on a header sorts by value, a second the other way, blanks last; the samples a
    page at a time, a filter starting again at the first page."""
    import json

    import finbench.reports.page as shared

    monkeypatch.setattr(shared, "PAGE_ROWS", 10)
    report(pilot_html.parent)
    manifest = json.loads((pilot_html.parent / "manifest.json").read_text())
    try:
        with browser_page() as (page, problems):
            page.goto(pilot_html.as_uri())
            header = page.inner_text("#run-header")
            assert manifest["data"]["snapshot_sha256"] in header
            assert f"engine {manifest['engine_version']}" in header
            models = page.locator("#run-models tbody tr").evaluate_all(
                "rs => rs.map(r => Array.from(r.cells).map(c => c.textContent))")
            by = {m[0]: m for m in models}
            assert len(models) == len(manifest["config"]["models"])
            assert by["GPT-4o"][2:] == ["skipped", "API key variable OPENAI_API_KEY is not set"]
            assert by["coin"][2] == "yes" and by["Qwen2.5 72B"][2] == "yes"
            table = "#table-scores_aggregate"
            column = page.locator(f"{table} thead th").all_inner_texts().index("BS [95% CI]")
            cells = f"{table} tbody tr td:nth-child({column + 1})"

            def keys():
                return page.locator(cells).evaluate_all(
                    "ts => ts.map(t => t.dataset.sort === undefined ? null"
                    " : parseFloat(t.dataset.sort))")

            assert page.locator(cells).first.evaluate("t => getComputedStyle(t).textAlign") \
                == "right"
            page.click(f"{table} thead th:nth-child({column + 1}) button")
            up = keys()
            assert up == sorted(up) and len(up) == 7
            page.click(f"{table} thead th:nth-child({column + 1}) button")
            assert keys() == sorted(up, reverse=True)
            assert page.get_attribute(f"{table} thead th:nth-child({column + 1})",
                                      "aria-sort") == "descending"
            listed = page.locator("#sample-list tbody tr")
            assert listed.count() == 10 and page.inner_text("#page") == "page 1 of 5"
            first = listed.first.get_attribute("data-task")
            page.click("#next")
            assert page.inner_text("#page") == "page 2 of 5"
            assert listed.first.get_attribute("data-task") != first
            for _ in range(3):
                page.click("#next")
            assert page.inner_text("#page") == "page 5 of 5" and listed.count() == 8
            assert page.is_disabled("#next")
            page.select_option("select[name=model]", "coin")
            assert page.inner_text("#page") == "page 1 of 1" and listed.count() == 9
    finally:
        monkeypatch.undo()
        report(pilot_html.parent)
    assert problems == []


def test_a_table_without_rows_is_no_section_and_numbers_are_told_from_text():
    import pandas as pd

    from finbench.reports.page import cells, sections

    frame = pd.DataFrame({"Model": ["a", "b", "c"], "BS": ["0.250", "undef", "-0.18 (9)"],
                          "N": [9, 0, 12], "Note": ["x", "1 y", ""]})
    columns, rows = cells(frame)
    assert [c["numeric"] for c in columns] == [False, True, True, False]
    assert [r[1].key for r in rows] == [0.25, None, -0.18]
    assert [r[2].key for r in rows] == [9.0, 0.0, 12.0]
    assert rows[1][3].key is None and not rows[1][3].numeric  # text that begins with a digit
    # hashes that happen to begin with digits are text, whatever their letters; a number may
    # end at a sign, a space or another symbol, never run into a letter or digit
    hashes = pd.DataFrame({"sha": ["07bad0ba34e3", "1623a7e7fc40"], "x": ["1.5e3x", "12ms"],
                           "y": ["2025-01-15", "+3.0e+2 (4)"]})
    columns, rows = cells(hashes)
    assert [c["numeric"] for c in columns] == [False, False, True]
    assert [r[2].key for r in rows] == [2025.0, 300.0]
    shown = {"scores_aggregate": (frame, "caption"), "paired_winkler": (frame.iloc[:0], "no")}
    made = sections(shown, ("scores_aggregate", "paired_winkler", "absent"), {})
    assert [s["id"] for s in made] == ["scores_aggregate"]
    assert made[0]["title"] == "Scores aggregate" and made[0]["caption"] == "caption"


# the words of the run header's values split across two lines though they fit on one
BROKEN_WORDS = """() => {
    const broken = [];
    for (const dd of document.querySelectorAll('dl.facts dd')) {
        const width = dd.getBoundingClientRect().width;
        const texts = document.createTreeWalker(dd, NodeFilter.SHOW_TEXT);
        for (let node; (node = texts.nextNode());) {
            for (const word of node.data.matchAll(/\\S+/g)) {
                const range = document.createRange();
                range.setStart(node, word.index);
                range.setEnd(node, word.index + word[0].length);
                const boxes = [...range.getClientRects()];
                const lines = new Set(boxes.map(b => Math.round(b.top))).size;
                if (lines > 1 && boxes.reduce((s, b) => s + b.width, 0) <= width) {
                    broken.push(word[0]);
                }
            }
        }
    }
    return broken;
}"""


def test_an_event_runs_page_shows_its_markets_in_a_browser(tmp_path):
    """The event pilot's report.html: its header, its tables, and a sample with the market's
    question, t0, price at t0, outcome and the posts retrieved before t0 (as the run's
    retrieval receipts have them). A table wider than the page scrolls in its own box: the
    page itself never scrolls sideways (its widest tables' last columns were cut off); a
    link of the bar of sections leaves the section's title in view, not under the bar; the
    header's long lines wrap between words (they broke inside them: "sa" / "mple")."""
    if BROWSER is None:  # (before the run: the browser would skip the test after it)
        pytest.skip("no chromium installed (Debian: apt-get install chromium; .ci/run does)")
    import pandas as pd

    cfg = tmp_path / "events.toml"
    cfg.write_text((ROOT / "configs" / "pilot_events.toml").read_text().replace(
        '"../data/', f'"{ROOT}/data/'))
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    report(out)
    tasks = pd.read_parquet(out / "tasks.parquet").set_index("task_id")
    labels = pd.read_parquet(out / "labels.parquet").set_index("task_id")
    retrieval = pd.read_parquet(out / "retrieval.parquet")
    markets = pd.read_parquet(ROOT / "data" / "events_sample" / "store" / "markets.parquet"
                              ).set_index("market_id")
    with browser_page() as (page, problems):
        page.goto((out / "report.html").as_uri())
        assert "GPT-4o Mini with posts" in page.inner_text("#run-models")
        assert "market" in page.inner_text("#table-event_scores")
        assert page.locator("#table-event_skill tbody tr").count() > 0
        widths = page.evaluate("""() => [document.documentElement.scrollWidth,
            document.documentElement.clientWidth, ...[...document.querySelectorAll('.wide')]
            .map(box => box.scrollWidth - box.clientWidth)]""")
        assert widths[0] == widths[1] == 1280, widths
        assert max(widths[2:]) > 0, widths  # one table is wider than the page: it scrolls
        # a link of the sticky bar (two lines here) leaves its section's title below it
        page.click("nav a[href='#figures']")
        page.wait_for_timeout(100)
        bar, title = page.evaluate("""() => [document.querySelector('nav')
            .getBoundingClientRect().bottom, document.querySelector('#figures h2')
            .getBoundingClientRect().top]""")
        assert bar <= title, (bar, title)
        # the header's long lines wrap between words: a word that fits a line is on one
        assert page.evaluate(BROKEN_WORDS) == []
        page.select_option("select[name=model]", "market")
        assert page.inner_text("#count") == "42 of 210 samples"  # 42 markets x 5 models
        row = page.locator("#sample-list tbody tr").first
        task = row.get_attribute("data-task")
        row.click()
        shown = page.inner_text("#detail")
        market = tasks.loc[task, "market_id"]
        assert markets.loc[market, "question"] in shown
        assert f"market price at t0: {labels.loc[task, 'price']:.4f}" in shown
        posts = retrieval[retrieval["task_id"] == task].sort_values("rank")
        assert f"retrieval found before t0: {len(posts)} post(s)" in shown
        assert all(post in shown for post in posts["post_id"])
    assert problems == []


def test_an_event_pages_retrieved_posts_are_each_tasks_best_first(tmp_path):
    """The posts a sample's detail lists, grouped in one pass: for each task asked, the lines
    a sort of that task's posts by rank gives (sub-second and whole-second times written as
    each alone is), tasks not asked left out, a task without posts absent."""
    import numpy as np
    import pandas as pd

    from finbench.tracks.events.page import _retrieved

    rng = np.random.default_rng(7)
    tasks = [f"m{i}@2024-01-0{1 + i % 5}T00:00:00Z" for i in range(40)]

    def made(rank: int) -> pd.Timestamp:  # whole seconds for odd ranks, milliseconds else
        ms = int(rng.integers(0, 10**9))
        return pd.Timestamp("2024-01-01", tz="UTC") + pd.Timedelta(
            milliseconds=ms - ms % 1000 if rank % 2 else ms)

    rows = [(t, rank, f"p{t}-{rank}", made(rank), float(rng.random()))
            for t in tasks[:30] for rank in rng.permutation(np.arange(1, 1 + rng.integers(1, 6)))]
    frame = pd.DataFrame(rows, columns=["task_id", "rank", "post_id", "created_utc", "score"])
    frame.to_parquet(tmp_path / "retrieval.parquet")
    asked = pd.Series(tasks[10:] + tasks[10:15])  # repeats: a task asked of several models
    want = {t: [f"  {p.rank}. {p.post_id} at {p.created_utc} (score {p.score:.3f})"
                for p in g.sort_values("rank").itertuples(index=False)]
            for t, g in frame.groupby("task_id") if t in set(asked)}
    got = _retrieved(tmp_path, asked)
    assert got == want and set(got) == set(tasks[10:30])
    assert any("." in line.split(" at ")[1].split("+")[0] for lines in got.values()
               for line in lines)  # a sub-second time among them, as str() writes it
    assert _retrieved(tmp_path / "none", asked) == {}


def test_the_sample_browsers_columns_become_cells_as_a_value_at_a_time_would():
    """A whole column made into the page's cells at once gives what each value made alone
    gives (:func:`~finbench.reports.writers.json_number`, ``str``): a NaN or missing number
    is null, an infinity (a Winkler score past the float range) its text, every other number
    a Python float; a missing text is empty."""
    import math

    import numpy as np
    import pandas as pd

    from finbench.reports.writers import json_number
    from finbench.tracks.intraday.page import _fmt, _numbers, _texts

    values = [0.25, np.nan, np.inf, -np.inf, -0.0, 1e7, 5e-324]
    got = _numbers(pd.Series(values))
    assert got == [0.25, None, "inf", "-inf", 0.0, 1e7, 5e-324]
    assert [type(v) for v in got] == [float, type(None), str, str, float, float, float]
    assert math.copysign(1.0, got[4]) == -1.0  # -0.0 kept
    assert got == [None if math.isnan(v) else json_number(float(v)) for v in values]
    assert _numbers(pd.Series([1.5, None], dtype="Float64")) == [1.5, None]
    assert _numbers(pd.Series([True, False])) == [1.0, 0.0]
    assert [_fmt(v) for v in got] == ["0.2500", "", "inf", "-inf", "-0.0000", "1e+07",
                                      "0.0000"]
    texts = [None, np.nan, "", "no answer", "x\ny"]
    assert _texts(pd.Series(texts, dtype=object)) == ["", "", "", "no answer", "x\ny"]
    assert _texts(pd.Series(texts[2:] + [None], dtype="str")) == ["", "no answer", "x\ny", ""]
