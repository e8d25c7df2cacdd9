"""Prompt variants as config (a model's ``[models.prompt]``): a user template filled from the
gate's fields only, reasoning before the JSON answer, earlier resolved tasks as examples
(their labels known before the task's ``now``, receipted, re-derived by the audit), repeated
samples aggregated by the declared rule; each variant its own template version and cache
keys; variants of one model compared paired on the same tasks.

The loopback server's ``variants`` model answers p_up 0.6 and [-0.01, 0.012]; with a seed s,
p_up (0.2, 0.5, 0.8)[s % 3] and [-0.01 k, 0.01 k], k = 1 + s % 3; asked to reason, prose
with braces before a fenced JSON object; shown examples, p_up 0.7."""

import json
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from finbench.audit import audit_run
from finbench.core.errors import ConfigError
from finbench.core.prompting import last_json_object, variant_tag
from finbench.runlog.rundir import load_run_config
from finbench.runlog.transcripts import Transcripts
from finbench.runner import run
from finbench.tracks.configs import load_config
from tests.test_mcp import EVENT_STORE, ROOT

QUIET = {"echo": lambda *_: None}
TEMPLATE = ('{{ ticker }} at {{ forecast_time }} {{ zone }}: {{ question }}\n{{ bars }}\n'
            '{{ instruction }}')


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-variants-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))


def model(name, base_url, extra=""):
    return (f'[[models]]\nname = "{name}"\nkind = "openai"\nmodel = "variants"\n'
            f'base_url = "{base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n{extra}')


VARIANTS = {
    "think": 'structured = "text"\n[models.prompt]\nreasoning = "think"\n',
    "examples": "[models.prompt]\nexamples = 3\n",
    "sampled": "seed = 0\n[models.prompt]\nsamples = 3\n",
    "median": 'seed = 0\n[models.prompt]\nsamples = 3\naggregate = "median"\n',
    "templated": f'[models.prompt]\nuser = """{TEMPLATE}"""\n',
}


def config(tmp_path, store, base_url, variants=VARIANTS, header=None):
    path = tmp_path / "variants.toml"
    header = header or (f'[data]\nstore = "{store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
                        'start = "2025-01-14"\nend = "2025-01-15"\n')
    path.write_text(header + '[[models]]\nname = "coin"\nkind = "coin"\n'
                    + model("plain", base_url)
                    + "".join(model(n, base_url, v) for n, v in variants.items()))
    return path


@pytest.fixture(scope="module")
def variant_run(tmp_path_factory, sample_store):
    from tests.llm_server import ChatServer

    tmp = tmp_path_factory.mktemp("variants")
    server = ChatServer()
    mp = pytest.MonkeyPatch()
    mp.setenv("FINBENCH_TEST_KEY", "sk-variants-test")
    mp.setenv("FINBENCH_CACHE_DIR", str(tmp / "cache"))
    try:
        out = run(config(tmp, sample_store, server.base_url), tmp / "out", **QUIET)
        yield out, server, tmp
    finally:
        mp.undo()
        server.close()


def rows_of(out, name="forecasts.parquet"):
    return pq.read_table(out / name).to_pandas().set_index(["model", "task_id"])


def test_each_variant_answers_as_its_rule_says_and_the_audit_is_clean(variant_run):
    out, server, _ = variant_run
    f = rows_of(out)
    for name in ("plain", "think", "templated"):  # the same answer, read from each prompt
        got = f.loc[name]
        assert got["valid"].all() and len(got) == 12
        assert (got["p_up"] == 0.6).all() and (got["lower"] == -0.01).all()
    # reasoning first: the JSON object that ends the text, braces in the prose before it
    think = f.loc["think"]
    assert think["raw"].str.startswith("The bars {open, close}").all()
    # examples: the server answers 0.7 when the prompt shows them
    assert (f.loc["examples", "p_up"] == 0.7).all()
    # three samples of seeds 0, 1, 2: p_up 0.2, 0.5, 0.8; intervals k = 1, 2, 3
    sampled, median = f.loc["sampled"], f.loc["median"]
    assert sampled["p_up"].to_numpy() == pytest.approx(np.full(12, 0.5), abs=1e-15)
    assert (sampled["lower"] == -0.02).all() and (sampled["upper"] == 0.02).all()
    assert (median["p_up"] == 0.5).all()
    detail = json.loads(sampled["detail"].iloc[0])
    assert [s["p_up"] for s in detail["samples"]] == [0.2, 0.5, 0.8]
    assert detail["spread"]["p_up"]["sd"] == pytest.approx(math.sqrt(0.06), rel=1e-12)
    assert (detail["spread"]["valid"], detail["spread"]["needed"]) == (3, 3)
    seeds = sorted({r["body"]["seed"] for r in server.requests if r["model"] == "variants"
                    and r["body"].get("seed") is not None})
    assert seeds == [0, 1, 2]
    # the two sampled variants share their samples: one call per (task, seed), 3 x 12
    assert sum(1 for r in server.requests if r["body"].get("seed") is not None) == 36
    costs = rows_of(out, "rows.parquet")
    assert (costs.loc["sampled", "calls"] == 3).all()
    assert (costs.loc["sampled", "tokens"] == 3 * 120).all()
    assert (costs.loc["plain", "calls"] == 1).all()
    assert audit_run(out, **QUIET) == []


def test_each_variant_has_its_own_template_version_and_prompt(variant_run):
    out, _, _ = variant_run
    f = rows_of(out)
    templates = {m: json.loads(f.loc[m, "detail"].iloc[0])["template"] for m in
                 ("plain", "think", "examples", "sampled", "templated")}
    config = load_run_config(out)
    digest = variant_tag(next(m for m in config.models if m.name == "templated").prompt)
    assert templates == {"plain": "finbench-prompt-v2", "think": "finbench-prompt-v2+think",
                         "examples": "finbench-prompt-v2+examples-3",
                         "sampled": "finbench-prompt-v2",
                         "templated": "finbench-prompt-v2" + digest}
    assert digest.startswith("+user-") and len(digest) == 6 + 12
    t = Transcripts(out)
    try:
        sent = {m: next(c for c in t.each_last(m) if c["task_id"] == "AAPL|2025-01-14|MIDDAY")
                for m in ("plain", "think", "templated")}
    finally:
        t.close()
    assert sent["templated"]["messages"][1]["content"].startswith(
        "AAPL at 12:30 ET: Question: will the mid price at 15:55 ET be above")
    assert sent["templated"]["messages"][1]["content"].endswith(
        "Answer with the JSON object only.")
    assert sent["templated"]["messages"][0] == sent["plain"]["messages"][0]
    think = sent["think"]["messages"]
    assert "End your reply with one JSON object:" in think[0]["content"]
    assert "Answer with one JSON object and nothing else" not in think[0]["content"]
    assert think[1]["content"].endswith("Reason first, then end your reply with the JSON object.")
    # a sampled variant asks the track's own prompt: the same receipts as the plain model
    assert (f.loc["sampled", "input_sha256"] == f.loc["plain", "input_sha256"]).all()
    assert (f.loc["think", "input_sha256"] != f.loc["plain", "input_sha256"]).all()


def test_examples_are_the_series_last_labels_known_before_now_and_receipted(variant_run):
    out, _, _ = variant_run
    f = rows_of(out)
    labels = pd.read_parquet(out / "labels.parquet").set_index("task_id")
    row = f.loc[("examples", "AAPL|2025-01-14|MIDDAY")]
    detail = json.loads(row["detail"])
    # 2025-01-09 was no session (a national day of mourning): the window skips it
    assert detail["examples"] == ["AAPL|2025-01-13|MIDDAY", "AAPL|2025-01-10|MIDDAY",
                                  "AAPL|2025-01-08|MIDDAY"]
    assert row["history_max_input_time"] == pd.Timestamp("2025-01-13 20:55", tz="UTC")
    assert row["history_max_input_time"] < row["max_input_time"]
    # the next session's task shows the 14th's own label, known at its 15:55 target
    later = json.loads(f.loc[("examples", "AAPL|2025-01-15|MIDDAY"), "detail"])
    assert later["examples"][0] == "AAPL|2025-01-14|MIDDAY"
    assert "AAPL|2025-01-14|MIDDAY" in labels.index
    t = Transcripts(out)
    try:
        call = next(c for c in t.each_last("examples") if c["task_id"] == "AAPL|2025-01-15|MIDDAY")
    finally:
        t.close()
    text = call["messages"][1]["content"]
    r = labels.loc["AAPL|2025-01-14|MIDDAY", "r"]
    assert (f"2025-01-14  12:30 -> 15:55 ET  log return {r:+.6f}  outcome: "
            f"{'up' if r > 0 else 'not up'}") in text
    assert text.index("Earlier tasks of this ticker") < text.index("Headlines, newest first")


def test_the_audit_names_an_example_receipt_or_a_sample_edited(variant_run, tmp_path):
    import shutil

    out, _, _ = variant_run
    copy = tmp_path / "edited"
    shutil.copytree(out, copy)

    def edit(table):
        df = table.to_pandas()
        at = (df["model"] == "examples") & (df["task_id"] == "AAPL|2025-01-15|MIDDAY")
        df.loc[at, "history_max_input_time"] = pd.Timestamp("2025-01-13 20:55", tz="UTC")
        at = (df["model"] == "sampled") & (df["task_id"] == "MSFT|2025-01-15|CLOSE")
        df.loc[at, "p_up"] = 0.55
        return df

    path = copy / "forecasts.parquet"
    table = pq.read_table(path)
    pq.write_table(pa.Table.from_pandas(edit(table), schema=table.schema,
                                        preserve_index=False), path)
    problems = audit_run(copy, **QUIET)
    assert any("AAPL|2025-01-15|MIDDAY, examples" in p and "history_max_input_time" in p
               for p in problems), problems
    assert any("MSFT|2025-01-15|CLOSE" in p and "sampled" in p and "p_up" in p
               for p in problems), problems


def test_variants_of_one_model_are_compared_paired_in_the_report(variant_run):
    from finbench.reports.build import report

    out, _, _ = variant_run
    report(out)
    table = pd.read_csv(out / "tables" / "prompt_variants.csv")
    by = table.set_index("model")
    assert set(by.index) == {"think", "examples", "sampled", "median", "templated"}
    assert (by["base"] == "plain").all() and (by["asked"] == 12).all()
    rows = pd.read_parquet(out / "rows.parquet")
    scored = rows[rows["scored"]]
    plain = scored[scored["model"] == "plain"].set_index("task_id")["brier"]
    for name in ("examples", "sampled"):
        mine = scored[scored["model"] == name].set_index("task_id")["brier"]
        shared = mine.index.intersection(plain.index)
        assert by.loc[name, "n"] == len(shared) == 11
        assert by.loc[name, "diff"] == pytest.approx((mine[shared] - plain[shared]).mean(),
                                                     rel=1e-9)
    assert by.loc["think", "diff"] == 0.0
    assert by.loc["sampled", "spread"] == pytest.approx(math.sqrt(0.06), rel=1e-9)
    assert by.loc["sampled", "tokens"] == 360 and by.loc["sampled", "tokens_base"] == 120
    assert by.loc["sampled", "variant"] == "samples 3 (mean, 3 valid needed)"
    page = (out / "report.html").read_text()
    assert "Prompt variants" in page


def test_a_second_folder_on_the_same_cache_asks_nothing_again(
        variant_run, sample_store, monkeypatch):
    out, server, tmp = variant_run
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp / "cache"))  # the run's cache
    asked = len(server.requests)
    again = run(config(tmp, sample_store, server.base_url), tmp / "again", **QUIET)
    assert len(server.requests) == asked
    pd.testing.assert_frame_equal(
        pq.read_table(again / "forecasts.parquet", columns=["model", "task_id", "p_up",
                                                           "lower", "upper", "valid",
                                                           "input_sha256"]).to_pandas(),
        pq.read_table(out / "forecasts.parquet", columns=["model", "task_id", "p_up",
                                                         "lower", "upper", "valid",
                                                         "input_sha256"]).to_pandas())


def test_a_sample_short_of_min_valid_makes_the_answer_invalid_and_says_why():
    from finbench.forecasters.answers import ParsedAnswer
    from finbench.forecasters.sampling import aggregate

    good = ParsedAnswer(True, None, "a", 0.2, -0.01, 0.01)
    bad = ParsedAnswer(False, "not_json: no JSON object in the text", "b")
    out, kept = aggregate([good, bad, good], "mean", 3)
    assert not out.valid
    assert out.error == ("samples: 2 of 3 valid, 3 needed; sample 2: not_json: no JSON "
                         "object in the text")
    out, kept = aggregate([good, bad, ParsedAnswer(True, None, "c", 0.5, -0.03, 0.02)],
                          "mean", 2)
    assert out.valid and out.p_up == 0.35 and (out.lower, out.upper) == (-0.02, 0.015)
    assert kept["spread"]["p_up"] == {"min": 0.2, "max": 0.5, "sd": pytest.approx(0.15)}
    out, _ = aggregate([good, ParsedAnswer(True, None, "c", 0.5, -0.03, 0.02),
                        ParsedAnswer(True, None, "d", 0.9, -0.02, 0.05)], "median", 3)
    assert (out.p_up, out.lower, out.upper) == (0.5, -0.02, 0.02)


@pytest.mark.parametrize("text, found", [
    ('I think {x} then {"p_up": 0.5, "lower": -1, "upper": 1}', '{"p_up": 0.5, "lower": -1, '
     '"upper": 1}'),
    ('reasoning\n```json\n{"a": {"b": 1}}\n```\n', '{"a": {"b": 1}}'),
    ('{"p_up": 0.5} and then more text', None),
    ("no object at all", None),
    ('{"a": 1} {"b": 2}', '{"b": 2}'),
])
def test_the_answer_is_the_json_object_that_ends_the_reasoning(text, found):
    assert last_json_object(text) == found


@pytest.mark.parametrize("extra, message", [
    ('[models.prompt]\nuser = "{{ ticker }} {{ close_price }}"\n',
     "names 'close_price', which the gate does not hold"),
    ('[models.prompt]\nuser = "{{ examples }}"\n', "the model is shown no examples"),
    ('[models.prompt]\nuser = "{{ ticker }}"\nexamples = 2\n',
     "does not show them"),
    ('[models.prompt]\nuser = "{% if %}"\n', "not a Jinja2 template (line 1"),
    ('[models.prompt]\nreasoning = "think"\n', "give structured = 'text'"),
    ('temperature = 0\n[models.prompt]\nsamples = 3\n', "at temperature 0"),
    ('[models.prompt]\nsamples = 2\nmin_valid = 3\n', "min_valid 3 is more than the 2"),
    ('[models.prompt]\naggregate = "median"\n', "read with samples > 1"),
    ('tools = ["bars"]\n[models.prompt]\nsamples = 2\n', "an agent (tools) is asked once"),
    ('format = "multiclass"\nhead = "native"\n[models.prompt]\nsamples = 2\n',
     "head 'native' reads the first token"),
])
def test_a_variant_the_gate_or_the_answer_cannot_hold_is_a_config_error(tmp_path, extra,
                                                                       message, sample_store):
    path = config(tmp_path, sample_store, "http://127.0.0.1:9/v1", {"bad": extra},
                  header=f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL"]\n'
                         'start = "2025-01-14"\nend = "2025-01-14"\n[tasks.classes]\n'
                         'band_ticks = 1\n')
    with pytest.raises(ConfigError, match=None) as err:
        load_config(path)
    assert message in str(err.value)
    assert "models" in str(err.value)


def test_batch_refuses_a_sampled_variant(tmp_path, sample_store):
    path = config(tmp_path, sample_store, "http://127.0.0.1:9/v1",
                  {"sampled": VARIANTS["sampled"]})
    with pytest.raises(ConfigError, match="prompt.samples"):
        run(path, tmp_path / "out", batch=True, **QUIET)
    assert not (tmp_path / "out").exists()


EVENT_HEADER = (f'track = "events"\n[data]\nstore = "{EVENT_STORE}"\n[tasks]\n'
                'resolved_from = 2024-03-01\nresolved_to = 2024-03-20\ncutoff = "lead"\n'
                'lead_hours = 72\n')


def test_event_variants_run_audit_and_are_compared(tmp_path, server):
    from finbench.reports.build import report

    variants = {"think": VARIANTS["think"], "sampled": VARIANTS["sampled"],
                "examples": "[models.prompt]\nexamples = 2\n",
                "templated": '[models.prompt]\nuser = """{{ question }} as of '
                             '{{ forecast_time }}\n{{ posts }}\n{{ instruction }}"""\n'}
    path = config(tmp_path, None, server.base_url, variants, header=EVENT_HEADER)
    text = path.read_text().replace('name = "coin"\nkind = "coin"', 'name = "market"\n'
                                    'kind = "market_price"')
    path.write_text(text)
    out = run(path, tmp_path / "out", **QUIET)
    f = rows_of(out)
    assert f.loc["think", "valid"].all() and (f.loc["think", "p_up"] == 0.6).all()
    assert (f.loc["sampled", "p_up"].to_numpy() == pytest.approx(0.5, abs=1e-15))
    assert f.loc["templated", "valid"].all()
    # examples: the last two markets of the category resolved strictly before t0
    from finbench.tracks.configs import load_config as load
    from finbench.tracks.events.track import EventsTrack

    history = EventsTrack(load(path)).history()
    tasks = pd.read_parquet(out / "tasks.parquet").set_index("task_id")
    shown = 0
    for task, row in f.loc["examples"].iterrows():
        detail = json.loads(row["detail"])
        t0, category = tasks.at[task, "t0"], tasks.at[task, "category"]
        before = history[(history["category"] == category) & (history["resolved_at"] < t0)]
        want = before["market_id"].tolist()[-2:][::-1]
        assert detail["examples"] == want
        if want:
            shown += 1
            assert row["history_max_input_time"] == before["resolved_at"].iloc[-1] < t0
            assert row["p_up"] == 0.3
    assert shown > 0
    assert audit_run(out, **QUIET) == []
    report(out)
    table = pd.read_csv(out / "tables" / "event_prompt_variants.csv").set_index("model")
    assert set(table.index) == {"think", "sampled", "templated", "examples"}
    assert (table["base"] == "plain").all()
    t = Transcripts(out)
    try:
        call = next(iter(t.each_last("templated")))
    finally:
        t.close()
    assert "as of" in call["messages"][1]["content"]
    assert call["messages"][1]["content"].endswith("Answer with the JSON object only.")


@pytest.mark.parametrize("extra, message", [
    ('[models.prompt]\nuser = "{{ price }}"\n', "show_market_price = false"),
    ('retrieval = "none"\n[models.prompt]\nuser = "{{ posts }}"\n', "retrieval = 'none'"),
    ('[models.prompt]\nuser = "{{ question }}"\nexamples = 2\n', "does not show them"),
])
def test_an_event_variant_naming_what_its_gate_leaves_out_is_a_config_error(tmp_path, extra,
                                                                           message):
    path = config(tmp_path, None, "http://127.0.0.1:9/v1", {"bad": extra},
                  header=EVENT_HEADER)
    path.write_text(path.read_text().replace('name = "coin"\nkind = "coin"',
                                             'name = "market"\nkind = "market_price"'))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert message in str(err.value)


def test_examples_are_the_same_whatever_the_runs_range(variant_run, sample_store, tmp_path,
                                                       monkeypatch):
    """A run of the second session alone reads the history further back for its examples:
    its prompts, receipts and answers are the two-session run's for the same tasks."""
    out, server, tmp = variant_run
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp / "cache"))
    header = (f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
              'start = "2025-01-15"\nend = "2025-01-15"\n')
    alone = run(config(tmp_path, sample_store, server.base_url,
                       {"examples": VARIANTS["examples"]}, header=header), tmp_path / "out",
                **QUIET)
    keys = ["task_id", "input_sha256", "history_max_input_time", "max_input_time", "p_up"]
    mine = rows_of(alone).loc["examples"].reset_index()[keys]
    whole = rows_of(out).loc["examples"].reset_index()[keys]
    whole = whole[whole["task_id"].str.contains("2025-01-15")].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, whole)
    examples = rows_of(alone).loc["examples", "detail"].map(lambda d: json.loads(d)["examples"])
    assert all(len(e) == 3 for e in examples)
    labels = pd.read_parquet(out / "labels.parquet").set_index("task_id")
    tasks = pd.read_parquet(out / "tasks.parquet").set_index("task_id")
    for task, shown in rows_of(out).loc["examples", "detail"].map(
            lambda d: json.loads(d)["examples"]).items():
        for example in shown:  # every example's label was known before the task's now
            if example in labels.index:
                assert labels.at[example, "label_known_at"] < tasks.at[task, "t_forecast"]
    assert audit_run(alone, **QUIET) == []


def test_a_three_class_models_samples_aggregate_by_their_mean(tmp_path, sample_store, server):
    header = (f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL"]\n'
              'start = "2025-01-14"\nend = "2025-01-14"\n[tasks.classes]\nband_ticks = 1\n')
    path = config(tmp_path, sample_store, server.base_url,
                  {"classes": 'format = "multiclass"\nseed = 0\n[models.prompt]\nsamples = 3\n'
                              'min_valid = 2\n'}, header=header)
    out = run(path, tmp_path / "out", **QUIET)
    rows = rows_of(out).loc["classes"]
    assert rows["valid"].all()
    for column, values in (("q_down", (0.2, 0.3, 0.1)), ("q_flat", (0.3, 0.3, 0.2)),
                           ("q_up", (0.5, 0.4, 0.7))):
        assert rows[column].to_numpy() == pytest.approx(
            np.full(len(rows), math.fsum(values) / 3), rel=1e-15)
    assert json.loads(rows["detail"].iloc[0])["spread"]["needed"] == 2
    assert audit_run(out, **QUIET) == []


def test_the_readme_variant_config_runs_as_written_and_is_compared(tmp_path, sample_store,
                                                                   server, monkeypatch):
    """The README's two models of gpt-4o-mini, redirected to the loopback server (which
    answers a model it does not script with the valid answer, reasoning or not)."""
    import re

    from finbench.reports.build import report

    monkeypatch.setenv("OPENAI_API_KEY", "sk-readme-test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    part = (ROOT / "README.md").read_text().split("## Prompt variants", 1)[1].split("\n## ", 1)[0]
    models = re.search(r"```toml\n(.*?)```", part, re.S).group(1)
    path = tmp_path / "c.toml"
    path.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL"]\n'
                    'start = "2025-01-14"\nend = "2025-01-15"\n' + models)
    out = run(path, tmp_path / "out", **QUIET)
    f = rows_of(out)
    assert f.loc["mini", "valid"].all() and f.loc["mini-think-5x", "valid"].all()
    detail = json.loads(f.loc["mini-think-5x", "detail"].iloc[-1])
    assert len(detail["samples"]) == 5 and len(detail["examples"]) == 5
    assert detail["template"] == "finbench-prompt-v2+think+examples-5"
    assert audit_run(out, **QUIET) == []
    report(out)
    table = pd.read_csv(out / "tables" / "prompt_variants.csv")
    assert table[["model", "base", "asked"]].values.tolist() == [["mini-think-5x", "mini", 6]]


def test_the_user_template_in_the_llm_docs_runs_as_written(tmp_path, sample_store, server,
                                                          monkeypatch):
    import re

    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    part = (ROOT / "docs" / "llm.md").read_text().split("## Prompt variants", 1)[1]
    models = re.search(r"```toml\n(.*?)```", part, re.S).group(1)
    path = tmp_path / "c.toml"
    path.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL"]\n'
                    'start = "2025-01-15"\nend = "2025-01-15"\n' + models)
    out = run(path, tmp_path / "out", **QUIET)
    assert rows_of(out).loc["mini-own-words", "valid"].all()
    t = Transcripts(out)
    try:
        call = next(c for c in t.each_last("mini-own-words")
                    if c["task_id"] == "AAPL|2025-01-15|MORNING")
    finally:
        t.close()
    text = call["messages"][1]["content"]
    assert text.startswith("AAPL, 2025-01-15: it is 09:30 ET.\nQuestion: will the mid price")
    assert len(re.findall(r"^20\d\d-\d\d-\d\d  09:30 -> 15:55 ET  log return", text, re.M)) == 10
    assert text.endswith("Answer with the JSON object only.")
    assert audit_run(out, **QUIET) == []


def test_the_leaderboard_says_each_entrys_prompt_variant(variant_run, tmp_path):
    from finbench.reports.leaderboard import leaderboard

    out, _, _ = variant_run
    leaderboard([out], tmp_path / "board", audit=lambda d: audit_run(d, **QUIET), **QUIET)
    board = pd.read_csv(tmp_path / "board" / "leaderboard.csv", keep_default_na=False)
    prompt = dict(zip(board["model"].str.split("/").str[-1], board["prompt"], strict=True))
    assert prompt == {"coin": "", "plain": "the track's prompt", "think": "think",
                      "examples": "examples 3", "sampled": "samples 3 (mean, 3 valid needed)",
                      "median": "samples 3 (median, 3 valid needed)",
                      "templated": "user template "
                      + variant_tag(next(m for m in load_run_config(out).models
                                         if m.name == "templated").prompt)[6:]}
