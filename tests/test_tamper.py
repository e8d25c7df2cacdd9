"""The audit catches what it claims to: each of 36 edits of a finished run (forecasts, labels,
tasks, journal, scores, per-row scores, manifest), made on its own copy of the run, is named
in the audit's output; the untouched run passes. Once it caught 8 of 24 such edits."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.audit import audit_run
from finbench.runner import run
from tests.helpers import baselines_toml
from tests.llm_server import ChatServer

ROWS = ["AAPL|2025-01-14|MIDDAY", "MSFT|2025-01-15|MORNING"]


@pytest.fixture(scope="module")
def clean(tmp_path_factory, sample_store):
    base = tmp_path_factory.mktemp("tamper")
    server = ChatServer()
    mp = pytest.MonkeyPatch()
    mp.setenv("FINBENCH_TAMPER_KEY", "sk-tamper")
    mp.setenv("FINBENCH_CACHE_DIR", str(base / "cache"))
    (base / "replay.csv").write_text("ticker,session,horizon,p_up,lower,upper\n" + "".join(
        f"{t},2025-01-{d},{h},0.5{i % 9},-0.01,0.01\n" for i, (t, d, h) in enumerate(
            (t, d, h) for t in ("AAPL", "MSFT") for d in ("13", "14", "15")
            for h in ("MORNING", "MIDDAY", "CLOSE"))))
    cfg = base / "cfg.toml"
    cfg.write_text(f"""
[data]
store = "{sample_store}"
[tasks]
tickers = ["AAPL", "MSFT"]
start = "2025-01-13"
end = "2025-01-15"
{baselines_toml("coin", "base_rate", "momentum", "climatology")}[[models]]
name = "scripted"
kind = "scripted"
answers = ['{{"p_up": 0.7, "lower": -0.01, "upper": 0.01}}', 'not json']
[[models]]
name = "replayed"
kind = "replay"
path = "replay.csv"
[[models]]
name = "llm"
kind = "openai"
model = "valid"
base_url = "{server.base_url}"
api_key_env = "FINBENCH_TAMPER_KEY"
""")
    out = run(cfg, base / "clean", echo=lambda *_: None)
    server.close()
    yield out
    mp.undo()


def rows_of(d: Path) -> pd.DataFrame:
    return pd.read_parquet(d / "forecasts.parquet")


def at(f: pd.DataFrame, model: str, task: str = ROWS[0]) -> int:
    return int(f.index[(f["model"] == model) & (f["task_id"] == task)][0])


def edit_forecasts(d: Path, change) -> list[str]:
    f = rows_of(d)
    f, expected = change(f)
    f.to_parquet(d / "forecasts.parquet", index=False)
    return expected


def edit_table(path: Path, change) -> None:
    frame = pd.read_parquet(path)
    change(frame).to_parquet(path, index=False)


def edit_manifest(d: Path, change) -> None:
    manifest = json.loads((d / "manifest.json").read_text())
    change(manifest)
    (d / "manifest.json").write_text(json.dumps(manifest, indent=2))


def row(f, i) -> str:
    return f"forecasts.parquet row {i + 1} ({f.at[i, 'task_id']}, {f.at[i, 'model']})"


def set_cell(f, i, col, value):
    f.at[i, col] = value
    return f


# -- the edits: each returns the fragments the audit must print ---------------------------
def llm_p_up(d):
    def change(f):
        i = at(f, "llm")
        return set_cell(f, i, "p_up", 0.99), [
            f"{row(f, i)}: differs from its journal record: p_up 0.99",
            f"{row(f, i)}: differs from its raw answer read again: p_up 0.99"]
    return edit_forecasts(d, change)


def coin_p_up(d):
    def change(f):
        i = at(f, "coin")
        return set_cell(f, i, "p_up", 0.9), [
            f"{row(f, i)}: differs from its answer computed again from the store: p_up 0.9"]
    return edit_forecasts(d, change)


def widened_interval(d):
    def change(f):
        i = at(f, "climatology")
        return set_cell(f, i, "lower", f.at[i, "lower"] - 0.05), [
            f"{row(f, i)}: differs from its journal record: lower"]
    return edit_forecasts(d, change)


def dropped_row(d):
    def change(f):
        return f.drop(index=at(f, "base_rate")).reset_index(drop=True), [
            f"task {ROWS[0]}: model base_rate was asked it and has no row"]
    return edit_forecasts(d, change)


def duplicated_row(d):
    def change(f):
        i = at(f, "momentum")
        return pd.concat([f, f.iloc[[i]]], ignore_index=True), [
            f"task {ROWS[0]}: model momentum has 2 rows"]
    return edit_forecasts(d, change)


def llm_losing_answers_invalid(d):
    labels = pd.read_parquet(d / "labels.parquet").set_index("task_id")

    def change(f):
        llm = f.index[f["model"] == "llm"]
        lost = [i for i in llm if labels.at[f.at[i, "task_id"], "status"] == "ok"
                and labels.at[f.at[i, "task_id"], "y"] == 0]
        f.loc[lost, "valid"] = False
        return f, [f"{row(f, lost[0])}: differs from its raw answer read again: valid False"]
    return edit_forecasts(d, change)


def foreign_task(d):
    def change(f):
        i = at(f, "base_rate", ROWS[1])
        f.at[i, "task_id"] = "ZZZZ|2025-01-15|CLOSE"
        return f, [f"forecasts.parquet row {i + 1} (ZZZZ|2025-01-15|CLOSE, base_rate): task is "
                   "not part of this run"]
    return edit_forecasts(d, change)


def late_input(d):
    def change(f):
        i = at(f, "llm")
        f.at[i, "max_input_time"] = f.at[i, "max_input_time"] + pd.Timedelta(hours=3)
        return f, [f"{row(f, i)}: max_input_time"]
    return edit_forecasts(d, change)


def forged_digest(d):
    def change(f):
        i = at(f, "llm", ROWS[1])
        return set_cell(f, i, "input_sha256", "0" * 64), [
            f"{row(f, i)}: input_sha256 000000000000 does not match the re-derived"]
    return edit_forecasts(d, change)


def history_count(d):
    def change(f):
        i = at(f, "base_rate")
        return set_cell(f, i, "history_count", 7), [
            f"{row(f, i)}: differs from its answer computed again from the store: "
            "history_count 7"]
    return edit_forecasts(d, change)


def fallback_removed(d):
    def change(f):
        i = int(f.index[(f["model"] == "momentum") & f["p_fallback"].notna()][0])
        return set_cell(f, i, "p_fallback", None), [f"{row(f, i)}: differs from its answer "
                                                    "computed again from the store: p_fallback"]
    return edit_forecasts(d, change)


def interval_note(d):
    def change(f):
        i = at(f, "coin")
        return set_cell(f, i, "interval_note", None), [f"{row(f, i)}: differs from its answer "
                                                       "computed again from the store: "
                                                       "interval_note None"]
    return edit_forecasts(d, change)


def renamed_model(d):
    def change(f):
        i = at(f, "coin", ROWS[1])
        return set_cell(f, i, "model", "coin2"), [
            "model 'coin2' is not a model of this run",
            f"task {ROWS[1]}: model coin was asked it and has no row"]
    return edit_forecasts(d, change)


def replay_p_up(d):
    def change(f):
        i = at(f, "replayed")
        return set_cell(f, i, "p_up", 0.01), [
            f"{row(f, i)}: differs from its answer computed again from the store: p_up 0.01"]
    return edit_forecasts(d, change)


def scripted_raw(d):
    def change(f):
        i = at(f, "scripted")
        return set_cell(f, i, "raw", '{"p_up": 0.1}'), [
            f"{row(f, i)}: differs from its answer computed again from the store: raw"]
    return edit_forecasts(d, change)


def baseline_detail(d):
    def change(f):
        i = at(f, "base_rate")
        return set_cell(f, i, "detail", f.at[i, "detail"].replace('"window_first"', '"wf"')), [
            f"{row(f, i)}: differs from its answer computed again from the store: detail"]
    return edit_forecasts(d, change)


def flipped_y(d):
    edit_table(d / "labels.parquet", lambda t: t.assign(
        y=t["y"].where(t["task_id"] != ROWS[0], 1 - t["y"])))
    return [f"labels.parquet task {ROWS[0]}: y", "labels.parquet: content differs"]


def changed_r(d):
    edit_table(d / "labels.parquet", lambda t: t.assign(
        r=t["r"].where(t["task_id"] != ROWS[0], t["r"] + 0.001)))
    return [f"labels.parquet task {ROWS[0]}: r", f"labels.parquet task {ROWS[0]}: r is not ln"]


def changed_status(d):
    edit_table(d / "labels.parquet", lambda t: t.assign(
        status=t["status"].where(t["task_id"] != ROWS[0], "no_target_price")))
    return [f"labels.parquet task {ROWS[0]}: status 'no_target_price' (store gives 'ok')"]


def manifest_alpha(d):
    edit_manifest(d, lambda m: m["config"]["scores"].update(alpha=0.1))
    return ["manifest.json: config scores.alpha is 0.1, but its config text gives 0.2"]


def manifest_config_invalid(d):
    edit_manifest(d, lambda m: m["config"]["scores"].update(alpha="lots"))
    return ["manifest.json: its config is not a valid config",
            "manifest.json: config scores.alpha is 'lots', but its config text gives 0.2"]


def manifest_config_hash(d):
    edit_manifest(d, lambda m: m.update(config_sha256="0" * 64))
    return ["manifest.json: config_sha256 000000000000 is not the hash of its config text"]


def manifest_skipped(d):
    edit_manifest(d, lambda m: m.update(skipped_models={"llm": "pretend it never ran"}))
    return ["model 'llm' is not a model of this run"]


def manifest_snapshot(d):
    edit_manifest(d, lambda m: m["data"].update(snapshot_sha256="f" * 64))
    return ["is not the run's ffffffffffff"]


def journal_part(d):
    part = sorted((d / "journal.parts").glob("*.parquet"))[0]  # the coin's answers
    edit_table(part, lambda t: t.assign(p_up=t["p_up"].where(t.index != 0, 0.75)))
    f = rows_of(d)
    i = int(f.index[(f["model"] == "coin") & (f["task_id"] == pd.read_parquet(part)["task_id"][0])][0])
    return [f"journal.parts/{part.name}: content differs from the hash",
            f"{row(f, i)}: differs from its journal record: p_up 0.5 (should be 0.75)"]


def journal_line_edited(d):
    lines = (d / "journal.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["p_up"] = 0.11
    lines[0] = json.dumps(record, sort_keys=True)
    (d / "journal.jsonl").write_text("\n".join(lines) + "\n")
    f = rows_of(d)
    i = at(f, "llm", record["task_id"])
    return ["journal.jsonl: content differs from the hash",
            f"{row(f, i)}: differs from its journal record: p_up 0.6 (should be 0.11)"]


def journal_line_dropped(d):
    lines = (d / "journal.jsonl").read_text().splitlines()
    task = json.loads(lines[-1])["task_id"]
    (d / "journal.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    f = rows_of(d)
    return ["journal.jsonl: content differs from the hash",
            f"{row(f, at(f, 'llm', task))}: has no journal record"]


def journal_part_added(d):
    parts = sorted((d / "journal.parts").glob("*.parquet"))
    shutil.copy(parts[0], d / "journal.parts" / "000099.parquet")
    return ["journal.parts/000099.parquet: a journal part manifest.json does not record"]


def journal_part_damaged(d):
    part = sorted((d / "journal.parts").glob("*.parquet"))[0]
    part.write_bytes(b"not parquet")
    return [f"journal.parts/{part.name}: content differs from the hash",
            f"journal.parts/{part.name}: cannot be read as a journal part"]


def journal_line_not_json(d):
    with open(d / "journal.jsonl", "a") as fh:
        fh.write("garbage {\n")
    lines = len((d / "journal.jsonl").read_text().splitlines())
    return ["journal.jsonl: content differs from the hash",
            f"journal.jsonl: line {lines} is not a journal line"]


def transcripts_damaged(d):
    for side in d.glob("transcripts.sqlite-*"):  # SQLite would read the pages from its WAL
        side.unlink()
    (d / "transcripts.sqlite").write_bytes(b"not a database " * 100)
    return ["transcripts.sqlite: cannot be read as the run's transcripts"]


def scores_value(d):
    edit_table(d / "scores.parquet", lambda t: t.assign(
        brier=t["brier"].where(~((t["model"] == "coin") & (t["slice_kind"] == "overall")), 0.1)))
    return ["scores.parquet: row coin/overall/all, brier is 0.1"]


def scores_csv(d):
    text = (d / "scores.csv").read_text()
    (d / "scores.csv").write_text(text.replace("coin,overall", "coin ,overall", 1))
    return ["scores.csv: content differs from the hash"]


def rows_value(d):
    table = pq.read_table(d / "rows.parquet").to_pandas()
    table.loc[(table["model"] == "coin") & (table["task_id"] == ROWS[0]), "brier"] = 0.0
    table.to_parquet(d / "rows.parquet", index=False)
    return [f"rows.parquet (model coin): row {ROWS[0]}, brier is 0.0",
            "rows.parquet: content differs from the hash"]


def tasks_dropped(d):
    edit_table(d / "tasks.parquet", lambda t: t.iloc[:-1])
    return ["tasks.parquet: task list differs from the one the config gives"]


def labels_column_dropped(d):
    edit_table(d / "labels.parquet", lambda t: t.drop(columns=["p_ref"]))
    return ["labels.parquet: has no column p_ref (the audit reads it",
            "labels.parquet: content differs"]


def labels_r_as_text(d):
    edit_table(d / "labels.parquet", lambda t: t.assign(r=t["r"].astype(str) + "%"))
    return ["labels.parquet: column r is large_string, not number (the audit reads it"]


def tasks_column_dropped(d):
    edit_table(d / "tasks.parquet", lambda t: t.drop(columns=["ticker"]))
    return ["tasks.parquet: has no column ticker (the audit reads it"]


def forecasts_p_up_as_text(d):
    return edit_forecasts(d, lambda f: (f.assign(p_up=f["p_up"].astype(str)), [
        "forecasts.parquet: column p_up is large_string, not number",
        "forecasts.parquet: content differs"]))


EDITS = [llm_p_up, coin_p_up, widened_interval, dropped_row, duplicated_row,
         llm_losing_answers_invalid, foreign_task, late_input, forged_digest, history_count,
         fallback_removed, interval_note, renamed_model, replay_p_up, scripted_raw,
         baseline_detail, flipped_y, changed_r, changed_status, manifest_alpha,
         manifest_config_invalid, manifest_config_hash, manifest_skipped, manifest_snapshot,
         journal_part, journal_line_edited, journal_line_dropped, journal_part_added,
         journal_part_damaged, journal_line_not_json, transcripts_damaged,
         scores_value, scores_csv, rows_value, tasks_dropped, labels_column_dropped,
         labels_r_as_text, tasks_column_dropped, forecasts_p_up_as_text]


def test_the_untouched_run_passes(clean):
    assert audit_run(clean) == []


def test_rows_written_again_as_stored_are_not_read_back(clean, tmp_path, monkeypatch):
    """The per-row scores computed again and written as the run writes them give
    rows.parquet's bytes, so no row of it is read back; a file the audit's writer would not
    write so (another pyarrow's, say: here its compression differs) is compared row by row
    and still passes; an edited one is compared row by row and named."""
    from finbench.tracks.intraday import audit_scores

    compared = []
    row_by_row = audit_scores._rows_problems
    monkeypatch.setattr(audit_scores, "_rows_problems",
                        lambda *a: compared.append(1) or row_by_row(*a))
    assert audit_scores.score_problems(clean) == [] and compared == []
    from finbench.tracks.intraday.scores import rows_options

    writes = audit_scores.rows_parquet_writer
    monkeypatch.setattr(audit_scores, "rows_parquet_writer", lambda where, table: pq.ParquetWriter(
        where, table.schema, **{**rows_options(table), "compression": "snappy"}))
    assert audit_scores.score_problems(clean) == [] and compared == [1]
    monkeypatch.setattr(audit_scores, "rows_parquet_writer", writes)
    d = tmp_path / "run"
    shutil.copytree(clean, d)
    want = rows_value(d)[0]
    assert any(want in p for p in audit_scores.score_problems(d)) and compared == [1, 1]


def test_rows_that_are_their_journal_parts_joined_are_not_compared_with_them(
        tmp_path, sample_store, monkeypatch):
    """A baselines' run writes its forecast table as its journal's parts joined byte for
    byte: the audit finds it so from footers and bytes and compares no row with its journal
    record (each task journalled once); a part whose value is edited is no longer what was
    joined, so every row is compared again and the edited one named."""
    from finbench.tracks.intraday import audit as intraday_audit

    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
                   f'start = "2025-01-13"\nend = "2025-01-15"\n'
                   + baselines_toml("coin", "base_rate", "momentum"))
    d = tmp_path / "run"
    run(cfg, d, echo=lambda *_: None)
    compared = []
    real = intraday_audit.compare
    monkeypatch.setattr(intraday_audit, "compare", lambda *a: compared.append(a[4]) or real(*a))
    assert audit_run(d) == []
    assert "its journal record" not in compared and compared  # (the recomputed ones: yes)
    part = sorted((d / "journal.parts").glob("*.parquet"))[0]
    edit_table(part, lambda t: t.assign(p_up=t["p_up"].where(t.index != 0, 0.75)))
    compared.clear()
    problems = audit_run(d)
    assert "its journal record" in compared
    assert any("differs from its journal record: p_up" in p and "(should be 0.75)" in p
               for p in problems), problems[:8]


@pytest.mark.parametrize("edit", EDITS, ids=[e.__name__ for e in EDITS])
def test_every_edit_is_named(clean, tmp_path, edit):
    copy = tmp_path / "run"
    shutil.copytree(clean, copy)
    expected = edit(copy)
    problems = audit_run(copy)
    assert expected and problems
    for fragment in expected:
        assert any(fragment in p for p in problems), (fragment, problems[:12])
    if edit.__name__.startswith(("llm", "coin", "widened", "dropped", "duplicated", "foreign",
                                 "late", "forged", "history", "fallback", "interval",
                                 "renamed", "replay", "scripted", "baseline")):
        assert any(p.startswith("forecasts.parquet: content differs from the hash")
                   for p in problems)


@settings(max_examples=80)
@given(st.lists(st.integers(0, 11), max_size=12), st.integers(0, 11), st.integers(0, 12))
def test_the_audits_row_picking_is_take_whatever_the_rows(rows, start, length):
    """The audit reads rows by slicing when they are one ascending run (a month of one
    model's rows) and puts them in order only when they are not: the same rows as a take."""
    import numpy as np
    import pyarrow as pa

    from finbench.audit.rows import in_order, picked

    table = pa.table({"n": pa.array(range(12)), "t": pa.array([f"r{i}" for i in range(12)])})
    run = list(range(start, min(start + length, 12)))  # a slice's rows
    for wanted in (np.array(rows, np.int64), np.array(run, np.int64)):
        assert picked(table, wanted).equals(table.take(pa.array(wanted)))
        shuffled = np.random.default_rng(len(wanted)).permutation(len(wanted))
        got = in_order(table.take(pa.array(wanted[shuffled])), shuffled)
        assert got.column("n").to_pylist() == wanted.tolist()


# -- the commands that read a run: each refuses files other than the ones the run recorded ----
def _readers():
    from finbench.reports.build import paper, report
    from finbench.reports.show import show
    from finbench.runner.scores import score_run
    from finbench.shards import merge_shards

    return {
        "score": score_run,
        "report": report,
        "show": lambda d: show(d, ROWS[0]),
        "paper": lambda d: paper([d], d.parent / "paper", echo=lambda *_: None),
        "merge": lambda d: merge_shards([d], d.parent / "merged"),
    }


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()
            and p.name != ".finbench.lock"}


@pytest.mark.parametrize("reader", ["score", "report", "show", "paper", "merge"])
def test_a_command_reading_a_changed_run_refuses_it_and_writes_nothing(clean, tmp_path, reader):
    """A label changed after the run wrote it (valid Parquet, one value) would flow into the
    scores, tables, the paper or a merged run; each command names the file and both hashes,
    and writes nothing."""
    from finbench.core.errors import RunError

    copy = tmp_path / "run"
    shutil.copytree(clean, copy)
    flipped_y(copy)
    before = _files(copy)
    with pytest.raises(RunError, match=r"run: labels\.parquet \(recorded [0-9a-f]{12}, now "
                                       r"[0-9a-f]{12}\): not the file\(s\) the run recorded"):
        _readers()[reader](copy)
    assert _files(copy) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no paper/, no merged/


def test_changed_scores_stop_the_report_until_score_writes_them_again(clean, tmp_path):
    """scores.parquet is derived: a changed one is refused by the report with the command
    that mends it, `finbench score` (which reads the forecasts and labels, not the scores),
    after which the report reads the run's own scores again."""
    from finbench.core.errors import RunError
    from finbench.reports.show import show

    copy = tmp_path / "run"
    shutil.copytree(clean, copy)
    scores_value(copy)
    for read in (_readers()["report"], lambda d: show(d, ROWS[0])):
        with pytest.raises(RunError, match=r"scores\.parquet \(recorded .*`finbench score "):
            read(copy)
    _readers()["score"](copy)
    assert (copy / "scores.parquet").read_bytes() == (clean / "scores.parquet").read_bytes()
    assert audit_run(copy) == []
    _readers()["report"](copy)
    assert (copy / "tables").is_dir()


@pytest.mark.parametrize("torn", ["scores.parquet", "rows.parquet"])
def test_a_torn_score_output_is_mended_by_score(clean, tmp_path, torn):
    """The refusal of a torn scores.parquet named `finbench score` as the mend, but score
    itself refused the run for that file."""
    from finbench.core.errors import RunError

    copy = tmp_path / "run"
    shutil.copytree(clean, copy)
    (copy / torn).write_bytes(b"x")
    with pytest.raises(RunError, match=rf"{torn}: cannot be read .*`finbench score`"):
        _readers()["report"](copy)
    _readers()["score"](copy)
    assert (copy / torn).read_bytes() == (clean / torn).read_bytes()
    assert audit_run(copy) == []


def test_a_file_the_manifest_does_not_record_is_refused_through_the_cli(clean, tmp_path, capsys):
    """A forecast table the manifest holds no hash of (a run stopped between writing it and
    recording it, or a record removed): one line, exit 2."""
    from finbench.cli import main

    copy = tmp_path / "run"
    shutil.copytree(clean, copy)
    edit_manifest(copy, lambda m: m["files"].pop("forecasts.parquet"))
    assert main(["report", str(copy)]) == 2
    err = capsys.readouterr().err
    assert "forecasts.parquet (not recorded): not the file(s) the run recorded" in err
    assert "Traceback" not in err and not (copy / "tables").exists()


def test_a_run_made_before_a_config_key_existed_audits_clean_and_an_edit_is_still_named(
        tmp_path, sample_store):
    """A later FinBench adds config keys with defaults ([report] paper_models, ...): a run
    whose manifest was written before them is read with the defaults, and the audit's
    config check was refusing it ("is None, but its config text gives False")."""
    import json

    from finbench.audit import audit_run
    from tests.helpers import aapl_config, baselines_toml

    out = run(aapl_config(tmp_path / "c.toml", sample_store, baselines_toml("coin")),
              tmp_path / "run", echo=lambda *_: None)
    path = out / "manifest.json"
    manifest = json.loads(path.read_text())
    for key in ("paper_models", "paper_pair", "paper_composite"):
        del manifest["config"]["report"][key]
    path.write_text(json.dumps(manifest, indent=2))
    assert audit_run(out, echo=lambda *_: None) == []
    manifest["config"]["report"]["seed"] = 7  # an edit is still one
    path.write_text(json.dumps(manifest, indent=2))
    assert any("config report.seed is 7" in p for p in audit_run(out, echo=lambda *_: None))
