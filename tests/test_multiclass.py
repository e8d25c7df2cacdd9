"""Three-class forecasts: the native head's extraction rule (native-v1) and the multiclass
scores, on the issue's acceptance fixtures with exact values."""

import math

import numpy as np
import pytest

from finbench.core.errors import ConfigError
from finbench.scoring import multiclass as mc
from finbench.tracks.intraday.logprobs import read_native
from tests.helpers import aapl_config

LABELS = {"D": "down", "F": "flat", "U": "up"}


def top(**masses):
    """A top_logprobs list in the API's shape from token -> probability."""
    return [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())}
            for t, p in masses.items()]


def test_renormalised_head_keeps_raw_values_and_excluded_mass():
    head = read_native(top(U=0.40, F=0.30, D=0.10, Maybe=0.05), LABELS)
    assert head.valid and head.error is None
    assert head.raw == pytest.approx((0.10, 0.30, 0.40), abs=1e-15)
    assert head.candidate_mass == pytest.approx(0.80, abs=1e-15)
    assert head.excluded_mass == pytest.approx(0.20, abs=1e-15)
    assert head.forecast == pytest.approx((0.125, 0.375, 0.5), abs=1e-15)
    assert sum(head.forecast) == pytest.approx(1.0, abs=1e-15)
    up = np.array([2])
    scored = mc.log_loss(up, np.array([head.forecast]))[0]
    assert scored == pytest.approx(-math.log(0.5), abs=1e-12) == pytest.approx(0.693147, abs=1e-6)
    # scoring the raw 0.40 instead would give another number: the evaluator does not
    assert -math.log(head.raw[2]) == pytest.approx(0.916291, abs=1e-6)
    assert {t["token"] for t in head.tokens} == {"U", "F", "D"}


def test_a_permuted_label_mapping_is_scored_with_the_changed_loss_or_refused():
    permuted = {"D": "up", "F": "flat", "U": "down"}  # the answer's labels mean the reverse
    head = read_native(top(U=0.40, F=0.30, D=0.10), permuted)
    assert head.forecast == pytest.approx((0.5, 0.375, 0.125), abs=1e-15)
    up = np.array([2])
    assert mc.log_loss(up, np.array([head.forecast]))[0] == pytest.approx(-math.log(0.125))
    for bad in ({"D": "up", "F": "up", "U": "down"}, {"D": "down", "F": "flat"},
                {" D": "down", "F": "flat", "U": "up"}):
        with pytest.raises(ConfigError, match="native head labels"):
            read_native(top(U=0.4), bad)


def test_collapsed_candidate_mass_is_invalid_and_kept():
    head = read_native(top(U=1e-6 / 3, F=1e-6 / 3, D=1e-6 / 3, Sure=0.999999), LABELS,
                       min_mass=0.5)
    assert not head.valid and head.error.startswith("candidate_mass_below_min: 1e-06 < 0.5")
    assert head.forecast == pytest.approx((1 / 3, 1 / 3, 1 / 3))  # kept, not scored
    assert head.candidate_mass == pytest.approx(1e-6)


@pytest.mark.parametrize(("logprobs", "error"), [
    ([-0.2, float("nan"), -1.6], "bad_logprob: a listed log-probability is no number <= 0 (nan)"),
    ([0.5, -1.0, -2.0], "bad_logprob: a listed log-probability is no number <= 0 (0.5)"),
    ([1000.0, -1.0, -2.0], "bad_logprob: a listed log-probability is no number <= 0 (1000.0)"),
    ([0.0, -0.5, -2.0], "listed_mass_above_1: the listed probabilities sum to 1.74"),
])
def test_a_list_that_is_no_distribution_makes_the_head_invalid(logprobs, error):
    """NaN gave a valid head of NaN probabilities; a positive log-probability a probability
    above 1 (or, from 710 on, an OverflowError that ended the run)."""
    listed = [{"token": t, "logprob": lp} for t, lp in zip("UFD", logprobs, strict=True)]
    head = read_native(listed, LABELS, min_mass=0.5)
    assert not head.valid and head.error.startswith(error)
    assert all(not math.isnan(b) for b in head.absent.values())
    ok = read_native([{"token": "U", "logprob": 0.0}, {"token": "F", "logprob": -math.inf}],
                     LABELS)  # certain: 1 and 0 are probabilities
    assert ok.valid and ok.forecast == (0.0, 0.0, 1.0)


def test_an_absent_label_is_bounded_and_a_split_one_invalid():
    head = read_native(top(U=0.7, F=0.2, Other=0.01), LABELS)
    assert head.valid and head.absent == {"D": pytest.approx(0.01)}
    assert head.forecast == pytest.approx((0.0, 0.2 / 0.9, 0.7 / 0.9))
    split = read_native(top(U=0.5, F=0.3, Do=0.1), {"Down": "down", "F": "flat", "U": "up"})
    assert not split.valid and split.error == "label_split: Down"


def test_scores_on_hand_computed_rows():
    p = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1], [1 / 3, 1 / 3, 1 / 3]])
    y = np.array([0, 0, -1])
    assert mc.brier(y, p)[:2].tolist() == pytest.approx([0.64 + 0.09 + 0.25, 0.16 + 0.09 + 0.01])
    assert mc.rps(y, p)[:2].tolist() == pytest.approx([0.8 ** 2 + 0.5 ** 2, 0.4 ** 2 + 0.1 ** 2])
    assert mc.log_loss(y, p)[:2].tolist() == pytest.approx([-math.log(0.2), -math.log(0.6)])
    assert mc.accuracy(y, p)[:2].tolist() == [0.0, 1.0]
    assert all(np.isnan(f(y, p)[2]) for f in (mc.brier, mc.rps, mc.log_loss, mc.accuracy))


@pytest.mark.parametrize(("model", "valid", "error"), [
    ("native", True, None), ("native-split", False, "label_split: Down")])
def test_the_loopback_server_gives_logprobs_in_the_apis_shape(server, model, valid, error):
    import asyncio

    from openai import AsyncOpenAI

    async def ask(**extra):
        client = AsyncOpenAI(api_key="sk-test", base_url=server.base_url, max_retries=0)
        try:
            return await client.post("/chat/completions", cast_to=dict, body={
                "model": model, "messages": [{"role": "user", "content": "D, F or U?"}],
                "max_tokens": 1, **extra})
        finally:
            await client.close()

    reply = asyncio.run(ask(logprobs=True, top_logprobs=20))
    listed = reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    labels = LABELS if model == "native" else {"Down": "down", "F": "flat", "U": "up"}
    head = read_native(listed, labels)
    assert head.valid == valid and head.error == error
    if model == "native":
        assert head.forecast == pytest.approx((0.125, 0.375, 0.5))
    else:
        assert head.absent == {"F": pytest.approx(0.01), "Down": pytest.approx(0.01)}
    import openai

    with pytest.raises(openai.BadRequestError, match="top_logprobs"):
        asyncio.run(ask(logprobs=True, top_logprobs=21))


@pytest.mark.parametrize("classes", ['band = 0.004\n', 'band_ticks = 80\ntick = 0.01\n'])
def test_labels_gain_the_declared_class_beside_r_and_y(tmp_path, sample_store, classes):
    import pandas as pd

    from finbench.audit import audit_run
    from finbench.runner import run

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
                   'start = "2025-01-06"\nend = "2025-01-15"\n[tasks.classes]\n' + classes
                   + '[[models]]\nname = "coin"\nkind = "coin"\n')
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    labels = pd.read_parquet(out / "labels.parquet")
    ok = labels["status"] == "ok"
    r, cls = labels["r"], labels["cls"]
    if classes.startswith("band ="):
        want = np.where(r < -0.004, 0, np.where(r > 0.004, 2, 1))
        assert (labels.loc[ok, "class_band"] == 0.004).all()
    else:  # moves of the mid in cents, at most 80 of them flat
        cents = ((labels["p_target"] - labels["p_ref"]) / 0.01).round(6)
        want = np.where(cents < -80, 0, np.where(cents > 80, 2, 1))
        assert np.allclose(labels.loc[ok, "class_band"],
                           np.log((labels.loc[ok, "p_ref"] + 0.8) / labels.loc[ok, "p_ref"]))
    assert (cls[ok] == want[ok]).all() and (cls[~ok] == -1).all()
    assert set(cls[ok]) == {0, 1, 2}  # the sample moves every way
    assert (labels.loc[ok & (cls == 2), "y"] == 1).all()  # up implies r > 0
    assert audit_run(out) == []
    labels.loc[ok.idxmax(), "cls"] = (labels.loc[ok.idxmax(), "cls"] + 1) % 3
    labels.to_parquet(out / "labels.parquet", index=False)
    assert any("cls" in p and "not what the partition gives" in p for p in audit_run(out))


def test_a_partition_needs_one_band(tmp_path, sample_store):
    from finbench.tracks.configs import load_config

    cfg = aapl_config(tmp_path / "c.toml", sample_store,
                      "[tasks.classes]\nband = 0.001\nband_ticks = 1\n", start="2025-01-06")
    with pytest.raises(ConfigError, match="give band .* or band_ticks .*, one of them"):
        load_config(cfg)


def class_run(tmp_path, sample_store, out="out"):
    from finbench.runner import run

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
                   'start = "2024-12-02"\nend = "2025-01-15"\n[tasks.classes]\nband = 0.004\n'
                   '[[models]]\nname = "coin"\nkind = "coin"\n'
                   '[[models]]\nname = "uniform"\nkind = "class_uniform"\n'
                   '[[models]]\nname = "freq"\nkind = "class_frequency"\nwindow = 20\n'
                   'min_count = 5\n')
    said = []
    return run(cfg, tmp_path / out, echo=said.append), said


def test_three_class_baselines_are_time_valid_and_scored_against_a_naive_count(tmp_path,
                                                                               sample_store):
    import pandas as pd

    from finbench.audit import audit_run

    out, said = class_run(tmp_path, sample_store)
    f = pd.read_parquet(out / "forecasts.parquet")
    labels = pd.read_parquet(out / "labels.parquet").set_index("task_id")
    tasks = pd.read_parquet(out / "tasks.parquet").set_index("task_id")
    uniform = f[f["model"] == "uniform"]
    assert np.allclose(uniform[["q_down", "q_flat", "q_up"]], 1 / 3) and uniform["valid"].all()
    assert uniform["p_up"].isna().all() and (uniform["interval_note"] == "not_applicable").all()
    freq = f[f["model"] == "freq"].set_index("task_id")
    # naive: the last 20 ok labels of the series known strictly before the forecast
    history = labels.join(tasks)
    checked = 0
    for task_id in freq.index[::7]:
        t = tasks.loc[task_id]
        past = history[(history["ticker"] == t["ticker"]) & (history["horizon"] == t["horizon"])
                       & (history["status"] == "ok")
                       & (history["label_known_at"] < t["t_forecast"])]
        past = past.sort_values("label_known_at").tail(20)
        row = freq.loc[task_id]
        if len(past) < 20:  # the run read its window further back than its own labels
            continue
        checked += 1
        want = [(past["cls"] == k).mean() for k in (0, 1, 2)]
        assert np.allclose(row[["q_down", "q_flat", "q_up"]].to_numpy(float), want), task_id
        assert row["history_count"] == len(past)
    assert checked >= 5
    scores3 = pd.read_csv(out / "scores3.csv")
    overall = scores3[scores3["slice_kind"] == "overall"].set_index("model")
    assert set(overall.index) == {"uniform", "freq"}
    ok = labels["status"] == "ok"
    y = labels.loc[ok, "cls"].to_numpy()
    assert overall.loc["uniform", "n"] == ok.sum()
    want_brier = ((np.full((len(y), 3), 1 / 3) - np.eye(3)[y]) ** 2).sum(axis=1).mean()
    assert overall.loc["uniform", "brier"] == pytest.approx(want_brier, rel=1e-9)
    assert overall.loc["freq", "bss3_uniform_n"] == ok.sum()
    scores = pd.read_csv(out / "scores.csv")
    assert set(scores["model"]) == {"coin"}  # the binary tables hold the binary models only
    # rows3.*: every three-class forecast with its class and scores, as scores3 averages them
    rows3 = pd.read_parquet(out / "rows3.parquet")
    assert rows3.groupby("model", sort=False).size().to_dict() == {
        "uniform": len(tasks), "freq": len(tasks)}
    mine = rows3[(rows3["model"] == "uniform") & rows3["scored"]]
    assert len(mine) == ok.sum() and mine["brier"].mean() == pytest.approx(want_brier, rel=1e-9)
    assert mine["cls"].tolist() == list(y)
    assert rows3[~rows3["scored"]]["brier"].isna().all()
    pd.testing.assert_frame_equal(pd.read_csv(out / "rows3.csv")[["task_id", "model"]],
                                  rows3[["task_id", "model"]])
    assert any(line.startswith("Three classes (down, flat, up)") for line in said)
    assert audit_run(out) == []
    f.loc[f.index[f["model"] == "freq"][3], "q_up"] += 0.01
    f.to_parquet(out / "forecasts.parquet", index=False)
    assert any("freq" in p and "q_up" in p for p in audit_run(out))


def test_a_three_class_baseline_needs_the_partition(tmp_path, sample_store):
    from finbench.tracks.configs import load_config

    cfg = aapl_config(tmp_path / "c.toml", sample_store,
                      '[[models]]\nname = "u"\nkind = "class_uniform"\n', start="2025-01-06")
    with pytest.raises(ConfigError, match=r"models.u: a three-class model needs the partition"):
        load_config(cfg)


def test_class_frequency_falls_back_to_thirds_without_history(tmp_path, sample_store):
    import pandas as pd

    from finbench.runner import run

    cfg = aapl_config(tmp_path / "c.toml", sample_store,
                      '[tasks.classes]\nband_ticks = 20\n[[models]]\nname = "freq"\n'
                      'kind = "class_frequency"\nmin_count = 2\n',
                      start="2024-09-20", end="2024-09-24")
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    f = pd.read_parquet(out / "forecasts.parquet").set_index("task_id")
    first = f.loc["AAPL|2024-09-20|MORNING"]  # the store's first day: no label known before
    assert np.allclose(first[["q_down", "q_flat", "q_up"]].to_numpy(float), 1 / 3)
    assert first["p_fallback"] == "1/3 each: 0 labels in the window < min_count 2"
    assert first["history_count"] == 0 and first["valid"]
    last = f.loc["AAPL|2024-09-24|CLOSE"]  # two earlier CLOSE labels: frequencies
    assert pd.isna(last["p_fallback"]) and last["history_count"] == 2
    assert np.isclose(last[["q_down", "q_flat", "q_up"]].to_numpy(float).sum(), 1)


def test_reports_show_the_three_class_table_beside_or_without_binary_ones(tmp_path,
                                                                          sample_store):
    import pandas as pd

    from finbench.reports.build import report
    from finbench.runner import run

    out, _ = class_run(tmp_path, sample_store)
    report(out)
    shown = (out / "tables" / "scores_three_class.md").read_text()
    assert "| all | freq |" in shown and "BSS3_uniform [95% CI] (n)" in shown
    raw = pd.read_csv(out / "tables" / "scores_three_class.csv")
    stored = pd.read_csv(out / "scores3.csv")
    pd.testing.assert_frame_equal(raw[stored.columns], stored)  # the run's scores, and CIs
    overall = raw[raw["slice_kind"] == "overall"].set_index("model")
    lo, est, hi = overall.loc["freq", ["brier_lo", "brier", "brier_hi"]]
    assert lo < est < hi  # 31 sessions: a real interval
    lo, est, hi = overall.loc["uniform", ["brier_lo", "brier", "brier_hi"]]
    assert lo == est == hi == pytest.approx(2 / 3)  # thirds score 2/3 whatever happens
    assert overall.loc["freq", "bss3_uniform_lo"] <= overall.loc["freq", "bss3_uniform"]
    bins = pd.read_csv(out / "tables" / "reliability3_bins.csv")
    mine = bins[(bins["model"] == "freq") & (bins["cls"] == "flat")]
    f = pd.read_parquet(out / "forecasts.parquet").query("model == 'freq' and valid")
    labels = pd.read_parquet(out / "labels.parquet").set_index("task_id")
    cls = labels.loc[f["task_id"], "cls"].to_numpy()
    scored = cls >= 0
    assert mine["count"].sum() == scored.sum()
    assert (mine["count"] * mine["obs_freq"].fillna(0)).sum() == pytest.approx(
        (cls[scored] == 1).sum())
    assert (out / "figures" / "reliability_three_class.png").is_file()
    assert (out / "tables" / "scores_aggregate.csv").is_file()  # the coin's binary tables
    assert 'id="table-scores_three_class"' in (out / "report.html").read_text()
    cfg = aapl_config(tmp_path / "only.toml", sample_store,
                      '[tasks.classes]\nband = 0.004\n[[models]]\nname = "u"\n'
                      'kind = "class_uniform"\n', start="2025-01-06")
    only = run(cfg, tmp_path / "only", echo=lambda *_: None)
    tables, figures = report(only)
    assert {p.name for p in tables} == {"scores_three_class.csv", "scores_three_class.md",
                                        "scores_three_class.tex", "reliability3_bins.csv"}
    assert {p.name for p in figures} == {"reliability_three_class.png",
                                         "reliability_three_class.pdf"}


def test_language_models_answer_three_classes_stated_or_native(tmp_path, sample_store, server,
                                                               llm_env):
    import json as js

    import pandas as pd

    from finbench.audit import audit_run
    from finbench.runner import run

    def llm(name, model, extra=""):
        return (f'[[models]]\nname = "{name}"\nkind = "openai"\nmodel = "{model}"\n'
                f'base_url = "{server.base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n'
                f'format = "multiclass"\n{extra}')

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL"]\n'
                   'start = "2025-01-14"\nend = "2025-01-15"\n[tasks.classes]\nband = 0.004\n'
                   '[[models]]\nname = "uniform"\nkind = "class_uniform"\n'
                   + llm("stated", "classes") + llm("off", "classes-bad-sum")
                   + llm("native", "native", 'head = "native"\n')
                   + llm("split", "native-split",
                         'head = "native"\n[models.labels]\nDown = "down"\nF = "flat"\n'
                         'U = "up"\n'))
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    f = pd.read_parquet(out / "forecasts.parquet").set_index(["model", "task_id"])
    stated = f.loc["stated"]
    assert stated["valid"].all() and np.allclose(stated[["q_down", "q_flat", "q_up"]],
                                                  [0.2, 0.3, 0.5])
    off = f.loc["off"]
    assert not off["valid"].any() and np.allclose(off["q_up"], 0.4)  # kept, never rescaled
    assert off["error"].str.contains("p_down + p_flat + p_up = 0.9, not 1 within 0.001",
                                     regex=False).all()
    native = f.loc["native"]
    assert native["valid"].all()
    assert np.allclose(native[["q_down", "q_flat", "q_up"]], [0.125, 0.375, 0.5])
    assert np.allclose(native["excluded_mass"], 0.2) and native["p_up"].isna().all()
    detail = js.loads(native["detail"].iloc[0])["native"]
    assert detail["rule"] == "native-v1" and detail["candidate_mass"] == pytest.approx(0.8)
    assert {c["token"] for c in detail["candidates"]} == {"U", "F", "D"}
    assert (f.loc["split", "error"] == "label_split: Down").all()
    bodies = {r["model"]: r["body"] for r in server.requests}
    assert bodies["native"]["logprobs"] is True and bodies["native"]["top_logprobs"] == 20
    assert bodies["native"]["max_tokens"] == 1 and "response_format" not in bodies["native"]
    assert bodies["classes"]["response_format"]["json_schema"]["name"] == "classes"
    system = bodies["native"]["messages"][0]["content"]
    assert "D (down), F (flat), U (up)" in system and "flat means |log return| <= 0.004" in system
    assert "p_down" in bodies["classes"]["messages"][0]["content"]
    assert js.loads(f.loc[("stated", "AAPL|2025-01-15|CLOSE"), "detail"])["template"] == \
        "finbench-prompt-3class-v1"
    scores3 = pd.read_csv(out / "scores3.csv").query("slice_kind == 'overall'").set_index("model")
    assert scores3.loc["off", "validity"] == 0 and scores3.loc["off", "n"] == 0
    assert scores3.loc["native", "excluded_mass_mean"] == pytest.approx(0.2)
    assert scores3.loc["stated", "bss3_uniform_n"] == scores3.loc["stated", "n"] > 0
    rows3 = pd.read_parquet(out / "rows3.parquet").set_index("model")  # what each cost
    assert (rows3.loc["uniform", ["calls", "tool_calls", "tokens", "dollars"]] == 0).all().all()
    assert (rows3.loc["stated", ["calls", "tool_calls", "tokens"]] == [1, 0, 120]).all().all()
    assert rows3.loc["stated", "dollars"].isna().all()  # no prices given
    assert audit_run(out) == []
    g = pd.read_parquet(out / "forecasts.parquet")
    g.loc[(g["model"] == "native").to_numpy().nonzero()[0][0], "q_up"] = 0.6
    g.to_parquet(out / "forecasts.parquet", index=False)
    assert any("native" in p and "q_up" in p for p in audit_run(out))


def test_scripted_three_class_answers_are_validated_and_never_rescaled(tmp_path, sample_store):
    import json as js

    import pandas as pd

    from finbench.audit import audit_run
    from finbench.runner import run

    answers = [js.dumps({"p_down": 0.1, "p_flat": 0.6, "p_up": 0.3}),
               js.dumps({"p_down": 0.5, "p_flat": 0.5, "p_up": 0.5}),
               js.dumps({"p_down": -0.1, "p_flat": 0.6, "p_up": 0.5}),
               "not json"]
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
                   'start = "2025-01-13"\nend = "2025-01-15"\n[tasks.classes]\nband = 0.004\n'
                   '[[models]]\nname = "s"\nkind = "scripted"\nformat = "multiclass"\n'
                   f'answers = {js.dumps(answers)}\n')
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    f = pd.read_parquet(out / "forecasts.parquet")
    by_raw = {raw: rows for raw, rows in f.groupby("raw")}
    good = by_raw[answers[0]]
    assert good["valid"].all() and np.allclose(good[["q_down", "q_flat", "q_up"]], [0.1, 0.6, 0.3])
    assert set(by_raw) == set(answers)  # the 18 tasks drew every scripted answer
    assert (by_raw[answers[1]]["error"] == "schema: p_down + p_flat + p_up = 1.5, not 1 "
                                            "within 0.001").all()
    assert not by_raw[answers[1]]["valid"].any()
    assert np.allclose(by_raw[answers[1]]["q_up"], 0.5)  # kept as given, never rescaled
    assert by_raw[answers[2]]["error"].str.startswith("schema: p_down").all()
    assert by_raw["not json"]["error"].str.startswith("not_json").all()
    assert audit_run(out) == []


def test_the_readme_three_class_config_is_valid(tmp_path, sample_store):
    from pathlib import Path

    from finbench.tracks.configs import load_config
    from finbench.tracks.intraday.config import model_format

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    part = readme.split("## Three classes", 1)[1].split("\n## ", 1)[0]
    block = part.split("`" * 3 + "toml\n", 1)[1].split("`" * 3, 1)[0]
    path = tmp_path / "cfg.toml"
    path.write_text(f'[data]\nstore = "{sample_store}"\n' + block.replace(
        "[tasks.classes]", '[tasks]\ntickers = ["AAPL"]\nstart = "2025-01-15"\n'
                           'end = "2025-01-15"\n[tasks.classes]'))
    config = load_config(path)
    assert [model_format(m) for m in config.models] == ["multiclass", "multiclass"]
    assert config.tasks.classes.band == 0.004 and config.models[1].head == "native"


def test_a_native_head_through_the_batch_api(tmp_path, sample_store, server, llm_env):
    import pandas as pd

    from finbench.audit import audit_run
    from finbench.runner import run

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL"]\n'
                   'start = "2025-01-15"\nend = "2025-01-15"\n[tasks.classes]\nband = 0.004\n'
                   f'[[models]]\nname = "n"\nkind = "openai"\nmodel = "native"\n'
                   f'base_url = "{server.base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n'
                   'format = "multiclass"\nhead = "native"\n')
    out = tmp_path / "out"
    for _ in range(3):  # submit, poll (in progress), collect
        run(cfg, out, echo=lambda *_: None, batch=True)
    f = pd.read_parquet(out / "forecasts.parquet")
    assert len(f) == 3 and f["valid"].all()
    assert np.allclose(f[["q_down", "q_flat", "q_up"]], [0.125, 0.375, 0.5])
    assert np.allclose(f["excluded_mass"], 0.2)
    assert audit_run(out) == []


def test_a_paper_of_several_runs_pools_their_three_class_tables(tmp_path, sample_store):
    import pandas as pd

    from finbench.reports.build import paper

    a, _ = class_run(tmp_path, sample_store, "a")
    b, _ = class_run(tmp_path, sample_store, "b")
    figures = paper([a, b], tmp_path / "paper", echo=lambda *_: None)
    table = pd.read_csv(tmp_path / "paper" / "tables" / "scores_three_class.csv")
    overall = table[table["slice_kind"] == "overall"].set_index("model")
    assert set(overall.index) == {"a/uniform", "a/freq", "b/uniform", "b/freq"}
    assert overall.loc["a/freq", "brier"] == overall.loc["b/freq", "brier"]  # the same run
    assert overall.loc["a/freq", "brier_lo"] < overall.loc["a/freq", "brier_hi"]
    assert any(p.name == "reliability_three_class.png" for p in figures)


def test_a_three_class_forecast_depends_on_its_task_alone(tmp_path, sample_store):
    """The same tasks in a short one-ticker run and a longer three-ticker run give the same
    rows, receipts included (the history is read back as far as each window needs)."""
    import pandas as pd

    from finbench.runner import run

    def one(name, start, tickers):
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = {tickers}\n'
                       f'start = "{start}"\nend = "2025-01-15"\n[tasks.classes]\nband = 0.004\n'
                       .replace("'", '"')
                       + '[[models]]\nname = "u"\nkind = "class_uniform"\n'
                         '[[models]]\nname = "f"\nkind = "class_frequency"\n')
        out = run(cfg, tmp_path / name, echo=lambda *_: None)
        return pd.read_parquet(out / "forecasts.parquet").drop(columns="latency")

    short = one("short", "2025-01-13", ["AAPL"])
    long = one("long", "2024-11-25", ["NVDA", "AAPL", "MSFT"])
    long = long[long["task_id"].isin(short["task_id"])]
    key = ["model", "task_id"]
    pd.testing.assert_frame_equal(short.sort_values(key).reset_index(drop=True),
                                  long.sort_values(key).reset_index(drop=True))
    assert len(short) == 18


def test_the_printed_class_summary_says_undef_where_a_reference_scores_zero():
    """It printed "nan" where the tables say "undef" (a reference that scored 0)."""
    import pandas as pd

    from finbench.tracks.intraday.summary import render_class_summary

    table = pd.DataFrame({"slice_kind": ["overall"], "model": ["m"], "n": [17],
                          "brier": [0.706], "rps": [0.235], "accuracy": [0.53],
                          "bss3_freq": [float("nan")], "bss3_freq_n": [17],
                          "bss3_uni": [-0.0588], "bss3_uni_n": [17], "n_valid": [18],
                          "n_tasks": [18], "n_error": [0]})
    text = render_class_summary(table)
    assert "undef (17)" in text and "-0.059 (17)" in text and "nan" not in text
