"""Three-class forecasts: the native head's extraction rule (native-v1) and the multiclass
scores, on the issue's acceptance fixtures with exact values."""

import math

import numpy as np
import pytest

from finbench.core.errors import ConfigError
from finbench.forecasters.logprobs import read_native
from finbench.scoring import multiclass as mc

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
    from finbench.core.config import load_config

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL"]\n'
                   'start = "2025-01-06"\nend = "2025-01-15"\n[tasks.classes]\nband = 0.001\n'
                   'band_ticks = 1\n')
    with pytest.raises(ConfigError, match="give band .* or band_ticks .*, one of them"):
        load_config(cfg)
