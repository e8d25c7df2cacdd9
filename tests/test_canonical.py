"""The canonical text of score tables (whose SHA-256 is a run's score digest) written a
column at a time is ``json.dumps`` of every value made plain one at a time (tests.reference),
byte for byte; numpy's rounding to 12 places is Python's wherever it is used."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.runner.canonical import BATCH_ROWS, canonical_pieces, rounded_like_python
from tests.reference import naive_canonical_tables

# a value within an ulp of a tie at 12 places, or at one: where numpy's product may round
# the wrong way, so Python rounds it
NEAR_TIES = st.builds(lambda k, step, sign: sign * float(np.nextafter(
    (k + 0.5) / 1e12, np.inf if step > 0 else -np.inf)) if step else sign * (k + 0.5) / 1e12,
    st.integers(0, 10**6), st.integers(-1, 1), st.sampled_from([1.0, -1.0]))
FLOATS = st.one_of(st.floats(allow_nan=False, allow_infinity=False), NEAR_TIES,
                   st.floats(-2000, 2000), st.sampled_from([0.0, -0.0, 1e-13, -4e-13, 5e-13,
                                                            1125.8999, 1e300, 5e-324]))


@settings(max_examples=300)
@given(st.lists(FLOATS, max_size=50))
def test_numpys_rounding_is_pythons_bit_for_bit(values):
    got = rounded_like_python(np.array(values, np.float64))
    want = np.array([round(v, 12) + 0.0 for v in values], np.float64)
    assert got.view(np.int64).tolist() == want.view(np.int64).tolist()


TEXTS = st.text(st.characters(codec="utf-8"), max_size=8)
COLUMNS = {
    "double": (pa.float64(), st.one_of(FLOATS, st.none(), st.sampled_from([math.nan, math.inf,
                                                                           -math.inf]))),
    "single": (pa.float32(), st.one_of(st.floats(-1e6, 1e6, width=32), st.none())),
    "count": (pa.int64(), st.one_of(st.integers(-2**63, 2**63 - 1), st.none())),
    "big": (pa.uint64(), st.one_of(st.integers(0, 2**64 - 1), st.none())),
    "small": (pa.int8(), st.one_of(st.integers(-128, 127), st.none())),
    "flag": (pa.bool_(), st.one_of(st.booleans(), st.none())),
    "text": (pa.string(), st.one_of(TEXTS, st.none())),
    "long_text": (pa.large_string(), st.one_of(TEXTS, st.none())),
    "when": (pa.timestamp("ns", "UTC"), st.one_of(st.none(), st.datetimes(  # (bounds: naive)
        dt.datetime(1990, 1, 1), dt.datetime(2100, 1, 1),  # noqa: DTZ001
        timezones=st.just(dt.UTC)))),
    "day": (pa.date32(), st.one_of(st.none(), st.dates())),
}


@st.composite
def tables(draw):
    """One to three tables of a few of :data:`COLUMNS`' kinds, each of some rows."""
    out = {}
    for name in draw(st.lists(st.sampled_from(["rows.parquet", "scores.parquet", "b.parquet"]),
                              min_size=1, max_size=3, unique=True)):
        kinds = draw(st.lists(st.sampled_from(sorted(COLUMNS)), max_size=5, unique=True))
        count = draw(st.integers(0, 12))
        out[name] = pa.table({k: pa.array([draw(COLUMNS[k][1]) for _ in range(count)],
                                          COLUMNS[k][0]) for k in kinds})
    return out


@settings(max_examples=150)
@given(tables())
def test_the_text_is_json_dumps_of_every_value_made_plain(tmp_path_factory, drawn):
    folder = tmp_path_factory.mktemp("canonical")
    paths = {}
    for name, table in drawn.items():
        pq.write_table(table, folder / name, row_group_size=5)
        paths[name] = folder / name
    want = naive_canonical_tables({n: pq.read_table(p) for n, p in paths.items()})
    assert "".join(canonical_pieces(paths)) == want


def test_many_rows_are_written_batch_after_batch(tmp_path):
    """More rows than a batch: the batches' rows joined as the whole table's."""
    rng = np.random.default_rng(4)
    count = BATCH_ROWS + 1001
    table = pa.table({"x": rng.random(count), "n": rng.integers(0, 9, count),
                      "t": pa.array([f"t{i % 97}" for i in range(count)])})
    pq.write_table(table, tmp_path / "rows.parquet")
    got = "".join(canonical_pieces({"rows.parquet": tmp_path / "rows.parquet"}))
    assert got == naive_canonical_tables({"rows.parquet": table})


def test_an_infinite_score_is_written_as_text(tmp_path):
    """A Kelly growth of -inf (a probability of 0 on the side that came) is the text "-inf",
    as ``finbench show --json`` writes it: JSON has no such number."""
    pq.write_table(pa.table({"kelly": [0.1, -math.inf, math.inf, math.nan]}),
                   tmp_path / "rows.parquet")
    got = "".join(canonical_pieces({"rows.parquet": tmp_path / "rows.parquet"}))
    assert got == '{"rows.parquet":{"columns":["kelly"],"rows":[[0.1],["-inf"],["inf"],[null]]}}'
    assert got == naive_canonical_tables({"rows.parquet": pq.read_table(tmp_path /
                                                                        "rows.parquet")})


def test_a_run_with_an_infinite_kelly_growth_is_scored_and_its_digest_printed(tmp_path,
                                                                              sample_store):
    """`finbench score` of a run where a model said 0 on a move that came (its Kelly growth
    -inf) writes its scores and prints their digest, where it stopped with a traceback."""
    from finbench.runner import run
    from finbench.runner.scores import score_digest
    from tests.helpers import aapl_config, cli, scripted_toml

    cfg = aapl_config(tmp_path / "cfg.toml", sample_store, scripted_toml(
        sure_down='{"p_up": 0.0, "lower": -0.01, "upper": 0.01}'))
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    kelly = pq.read_table(out / "rows.parquet", columns=["kelly"]).column("kelly").to_numpy()
    assert np.isneginf(kelly).any()
    done = cli("score", out)
    assert done.returncode == 0, done.stderr
    assert f"scores digest sha256 {score_digest(out)}" in done.stdout
