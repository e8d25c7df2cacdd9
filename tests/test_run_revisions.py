"""A run gains models when its config gains them: labels, baselines and other models' answers
are kept (no request repeated), each config revision is recorded, the result is the run a
fresh directory would hold; any other change is refused with the keys that differ."""

import json
from pathlib import Path

import pandas as pd
import pytest

from finbench.audit import audit_run
from finbench.core.errors import RunError
from finbench.runner import run
from tests.helpers import llm_toml

pytestmark = pytest.mark.usefixtures("llm_env")


def write(tmp_path: Path, sample_store, models: list[str], *, end="2025-01-15",
          name="cfg.toml") -> Path:
    path = tmp_path / name
    path.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
                    f'start = "2025-01-14"\nend = "{end}"\n' + "\n".join(models))
    return path


COIN = '[[models]]\nname = "coin"\nkind = "coin"\n'
RATE = '[[models]]\nname = "rate"\nkind = "base_rate"\nmin_count = 5\n'
MOMENTUM = '[[models]]\nname = "mom"\nkind = "momentum"\nmin_count = 5\n'


def llm(name: str, url: str, extra: str = "") -> str:
    return llm_toml(url, extra, name=name)


def test_adding_models_extends_the_run_and_equals_a_fresh_run(tmp_path, sample_store, server):
    first = write(tmp_path, sample_store, [COIN, RATE, llm("a", server.base_url)])
    out = run(first, tmp_path / "out", echo=lambda *_: None)
    lines_before = (out / "journal.jsonl").read_text()
    assert server.total == 12
    grown = write(tmp_path, sample_store, [COIN, RATE, llm("a", server.base_url), MOMENTUM,
                                           llm("b", server.base_url, "seed = 5\n")])
    said: list[str] = []
    run(grown, tmp_path / "out", echo=said.append)
    assert server.total == 24  # b's 12 calls; none of a's again
    assert (out / "journal.jsonl").read_text().startswith(lines_before)  # a's lines kept
    assert any("the run gains model(s) mom, b;" in x for x in said)
    manifest = json.loads((out / "manifest.json").read_text())
    revisions = manifest["config_revisions"]
    assert len(revisions) == 2 and revisions[1]["added"] == ["mom", "b"]
    assert revisions[1]["removed"] == [] and revisions[1]["config_sha256"] == manifest[
        "config_sha256"] != revisions[0]["config_sha256"]
    assert [m["name"] for m in manifest["models"]] == ["coin", "rate", "a", "mom", "b"]
    assert audit_run(out) == []

    fresh = run(grown, tmp_path / "fresh", echo=lambda *_: None)  # the cache answers a and b
    for name in ("scores.csv", "labels.parquet", "tasks.parquet"):
        assert (out / name).read_bytes() == (fresh / name).read_bytes(), name
    cols = ["task_id", "model", "p_up", "lower", "upper", "valid", "input_sha256"]
    pd.testing.assert_frame_equal(pd.read_parquet(out / "forecasts.parquet")[cols],
                                  pd.read_parquet(fresh / "forecasts.parquet")[cols])


def test_a_model_never_started_may_go_and_one_with_answers_may_not(tmp_path, sample_store,
                                                                   server, monkeypatch):
    never = llm("nokey", server.base_url).replace("FINBENCH_TEST_KEY", "FINBENCH_NO_SUCH_KEY")
    first = write(tmp_path, sample_store, [COIN, never, llm("a", server.base_url)])
    out = run(first, tmp_path / "out", echo=lambda *_: None)  # nokey skipped: no answers
    run(write(tmp_path, sample_store, [COIN, llm("a", server.base_url)]), out,
        echo=lambda *_: None)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config_revisions"][1]["removed"] == ["nokey"]
    assert audit_run(out) == []
    with pytest.raises(RunError, match=r"drops model\(s\) a, whose answers are in the run "
                                       r"\(12 for a\)"):
        run(write(tmp_path, sample_store, [COIN]), out, echo=lambda *_: None)


@pytest.mark.parametrize(("change", "keys"), [
    ({"end": "2025-01-16"}, "tasks.end differ"),
    ({"models": [COIN, RATE.replace("min_count = 5", "min_count = 6")]},
     "models.rate.min_count differ"),
    ({"models": [COIN.replace('"coin"\nkind', '"coin"\nhorizons = ["MORNING"]\nkind'), RATE]},
     "models.coin.horizons differ"),
])
def test_any_other_change_is_refused_naming_the_keys(tmp_path, sample_store, change, keys):
    out = run(write(tmp_path, sample_store, [COIN, RATE]), tmp_path / "out",
              echo=lambda *_: None)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    changed = write(tmp_path, sample_store, change.get("models", [COIN, RATE]),
                    end=change.get("end", "2025-01-15"))
    with pytest.raises(RunError, match="holds a run of a different config") as info:
        run(changed, out, echo=lambda *_: None)
    assert keys in str(info.value)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_a_config_whose_text_alone_changed_resumes_its_run(tmp_path, sample_store):
    first = write(tmp_path, sample_store, [COIN, RATE])
    out = run(first, tmp_path / "out", echo=lambda *_: None)
    before = (out / "scores.csv").read_bytes()
    first.write_text("# a comment, and the same run\n" + first.read_text())
    run(first, out, echo=lambda *_: None)
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(manifest["config_revisions"]) == 2
    assert manifest["config_revisions"][1]["added"] == []
    assert (out / "scores.csv").read_bytes() == before


def test_a_run_resumes_under_another_executor_section(tmp_path, sample_store):
    """Where a run runs changes none of its results: a config that gains an [executor]
    section resumes the run made without it (a changed model still does not)."""
    first = write(tmp_path, sample_store, [COIN, RATE])
    out = run(first, tmp_path / "out", echo=lambda *_: None)
    before = (out / "scores.csv").read_bytes()
    first.write_text(first.read_text() + '[executor]\nkind = "dask"\nworkers = 2\n')
    run(first, out, echo=lambda *_: None)  # the library's run runs here, whatever the section
    assert (out / "scores.csv").read_bytes() == before
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["executor"] == {"kind": "dask", "scheduler": None, "workers": 2,
                                              "months": 1}
    assert [r.get("added") for r in manifest["config_revisions"]] == [None, []]
    first.write_text(first.read_text().replace("min_count = 5", "min_count = 6"))
    with pytest.raises(RunError, match="models.rate.min_count differ"):
        run(first, out, echo=lambda *_: None)


def test_a_run_resumed_by_another_finbench_lists_each_in_its_manifest(tmp_path, sample_store,
                                                                        capsys):
    """A run made so far by one FinBench (version, git revision) and resumed by another goes
    on, keeping what it made; the run says so and the manifest's code_revisions lists each,
    with when it took over (for a run made before the list was kept: its manifest's version,
    from its start). Resumed by the same FinBench, nothing is added. Its audit says which
    made it, and with which it derived the rows again."""
    from finbench.cli import main
    from finbench.core.version import code_version
    from finbench.runner.manifest import describe_code, made_by

    cfg = write(tmp_path, sample_store, [COIN, RATE])
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    manifest = json.loads((out / "manifest.json").read_text())
    ours = code_version()
    assert manifest["code_revisions"] == [{**ours, "at": manifest["started_at"]}]
    assert made_by(manifest) is None  # made by this FinBench alone: nothing to say
    older = {"package_version": "0.0.9", "git_revision": "f" * 40}
    del manifest["code_revisions"]  # as a run made before the key was recorded
    (out / "manifest.json").write_text(json.dumps({**manifest, **older}))
    before = (out / "forecasts.parquet").read_bytes()
    said = []
    run(cfg, out, echo=said.append)
    assert f"{out}: made so far by FinBench 0.0.9 (git ffffffffffff), resumed by FinBench " \
           f"{ours['package_version']} (git {str(ours['git_revision'])[:12]}): what it made " \
           "is kept, what is made now is this one's (the manifest's code_revisions lists " \
           "both)" in said
    revisions = json.loads((out / "manifest.json").read_text())["code_revisions"]
    assert revisions[0] == {**older, "at": manifest["started_at"]}
    assert {k: revisions[1][k] for k in ours} == ours and len(revisions) == 2
    assert revisions[1]["at"] >= manifest["started_at"]
    assert (out / "forecasts.parquet").read_bytes() == before
    said = []
    run(cfg, out, echo=said.append)
    assert json.loads((out / "manifest.json").read_text())["code_revisions"] == revisions
    assert not any("resumed by" in line for line in said)
    capsys.readouterr()
    assert main(["audit", str(out)]) == 0
    assert (f"{out}: made by FinBench 0.0.9 (git ffffffffffff) from {manifest['started_at']}, "
            f"then {describe_code(ours)} from {revisions[1]['at']}; derived again with this "
            f"{describe_code(ours)}: rows another FinBench computes otherwise are named as "
            "violations") in capsys.readouterr().out.splitlines()
