"""Kept calendars (finbench.core.session_cache): the sessions, opens and closes are those
exchange-calendars gives; a damaged file is never used; a planted one is what a run reads, and
the audit, which builds its calendars from the library, names the difference."""

import json

import exchange_calendars as xcals
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.audit import audit_run
from finbench.core import calendar, session_cache
from finbench.core.calendar import from_library, get_calendar, is_calendar
from finbench.runner import run
from finbench.tracks.intraday.config import TasksConfig
from tests.helpers import aapl_config, baselines_toml
from tests.reference import library_calendar

START, END = pd.Timestamp("2024-01-02"), pd.Timestamp("2024-12-31")
PINNED = ("2009-12-25", "2030-01-07")  # the decades get_calendar pins 2024 to, padded a week
LIBRARY = library_calendar("XNYS", *PINNED)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder of the test's own, and no calendar held in this process."""
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))
    calendar._calendar.cache_clear()
    yield tmp_path / "cache"
    calendar._calendar.cache_clear()


def fresh(name="XNYS", start=START, end=END):
    """The calendar as a new command gets it (nothing held in this process)."""
    calendar._calendar.cache_clear()
    return get_calendar(name, start, end)


def same_as_library(cal) -> None:
    assert np.array_equal(cal.sessions.asi8, LIBRARY.sessions.asi8)
    for ours, theirs in ((cal.opens, LIBRARY.opens), (cal.closes, LIBRARY.closes)):
        assert str(ours.dtype) == "datetime64[ns, UTC]"
        assert np.array_equal(ours.index.asi8, theirs.index.asi8)
        assert np.array_equal(ours.to_numpy("datetime64[ns]"), theirs.to_numpy("datetime64[ns]"))


def test_a_kept_calendar_is_the_library_s(cache):
    built = fresh()
    path = session_cache.sessions_path("XNYS", *PINNED)
    assert path.is_file() and path.parent.parent == cache
    kept = fresh()
    same_as_library(built)
    same_as_library(kept)
    assert len(kept.sessions) == 5036
    assert kept.session_close("2024-11-29") == pd.Timestamp("2024-11-29 18:00", tz="UTC")
    assert kept.session_open("2024-07-03") == pd.Timestamp("2024-07-03 13:30", tz="UTC")
    assert pd.Timestamp("2025-01-09") not in kept.sessions  # a national day of mourning


@settings(max_examples=60)
@given(st.dates(min_value=LIBRARY.first_session.date(), max_value=LIBRARY.last_session.date()),
       st.integers(0, 400))
def test_sessions_in_range_are_the_library_s(first, days):
    last = min(pd.Timestamp(first) + pd.Timedelta(days=days), LIBRARY.last_session)
    ours = get_calendar("XNYS", START, END).sessions_in_range(first, last)
    assert np.array_equal(ours.asi8, LIBRARY.sessions_in_range(first, last).asi8)


def test_the_file_names_the_library_versions_that_made_it(cache):
    fresh()
    name = session_cache.sessions_path("XNYS", *PINNED).name
    assert f"xcals{xcals.__version__}" in name and f"pandas{pd.__version__}" in name


def planted(drop: pd.Timestamp, *, checksum: bool) -> None:
    """The kept XNYS file rewritten without the session ``drop`` (its checksum made again,
    or left as it was)."""
    path = session_cache.sessions_path("XNYS", *PINNED)
    with np.load(path) as data:
        kept = {k: data[k] for k in data.files}
    keep = kept["sessions"] != drop.value
    arrays = {k: kept[k][keep] for k in session_cache.ARRAYS}
    digest = session_cache._digest(arrays) if checksum else str(kept["sha256"])
    np.savez(path, key=kept["key"], sha256=np.str_(digest), **arrays)


@pytest.mark.parametrize("damage", ["truncated", "checksum", "not npz", "out of order"])
def test_a_damaged_file_is_made_again_from_the_library(cache, damage):
    fresh()
    path = session_cache.sessions_path("XNYS", *PINNED)
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:5000])
    elif damage == "checksum":
        planted(pd.Timestamp("2024-03-15"), checksum=False)
    elif damage == "not npz":
        path.write_text("sessions\n")
    else:  # consistent checksum, sessions out of order
        with np.load(path) as data:
            arrays = {k: data[k] for k in session_cache.ARRAYS}
        arrays["sessions"][[10, 11]] = arrays["sessions"][[11, 10]]
        np.savez(path, key=np.str_(session_cache._key("XNYS", *PINNED)),
                 sha256=np.str_(session_cache._digest(arrays)), **arrays)
    assert session_cache.load_sessions("XNYS", *PINNED) is None
    same_as_library(fresh())
    assert session_cache.load_sessions("XNYS", *PINNED) is not None  # written whole again


def test_a_folder_that_cannot_be_written_leaves_the_calendar_right(tmp_path, monkeypatch):
    (tmp_path / "a file").write_text("")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "a file"))
    same_as_library(fresh())
    same_as_library(fresh())
    calendar._calendar.cache_clear()


def test_a_planted_file_is_read_by_commands_but_never_by_the_audit(cache):
    """Inside ``from_library`` (the audit) calendars are built, and what is built is kept:
    the planted file is written over with the library's."""
    fresh()
    planted(pd.Timestamp("2024-03-15"), checksum=True)
    assert pd.Timestamp("2024-03-15") not in fresh().sessions  # what a command reads
    calendar._calendar.cache_clear()
    with from_library():
        same_as_library(get_calendar("XNYS", START, END))
    same_as_library(fresh())


def tasks(calendar_name: str) -> TasksConfig:
    return TasksConfig(tickers=["A"], start="2024-01-02", end="2024-01-02",
                       calendar=calendar_name)


def test_calendar_names_are_kept_and_no_is_the_library_s(cache):
    assert all(map(is_calendar, ("XNYS", "XLON", "24/7", "NYSE")))
    (names,) = cache.glob("calendars/names-*.json")
    assert tasks("XLON").calendar == "XLON"
    with pytest.raises(ValueError, match="'NOPE' is not an exchange-calendars calendar"):
        tasks("NOPE")
    names.write_text('["NOPE", "XNYS"]')  # a kept list that lost names and gained one
    assert tasks("XLON").calendar == "XLON"  # asked of the library, and the list kept again
    assert "XLON" in json.loads(names.read_text())
    names.write_text("[")  # not JSON: asked of the library
    assert tasks("XTKS").calendar == "XTKS"


def test_a_run_on_a_planted_calendar_fails_its_audit(cache, tmp_path, sample_store):
    """A kept file that lost a session changes a run's tasks; the audit, planning with the
    library's calendar, names the task list."""
    cfg = aapl_config(tmp_path / "cfg.toml", sample_store, baselines_toml("coin"),
                      start="2025-01-13")
    fresh(start=pd.Timestamp("2025-01-13"), end=pd.Timestamp("2025-01-15"))
    clean = run(cfg, tmp_path / "clean", echo=lambda *_: None)
    assert audit_run(clean) == []
    planted(pd.Timestamp("2025-01-14"), checksum=True)
    calendar._calendar.cache_clear()
    tampered = run(cfg, tmp_path / "tampered", echo=lambda *_: None)
    sessions = set(pd.read_parquet(tampered / "tasks.parquet")["session"])
    assert sessions == {"2025-01-13", "2025-01-15"}
    assert audit_run(tampered) == ["tasks.parquet: task list differs from the one the config "
                                   "gives"]


def test_without_the_packages_metadata_nothing_is_kept(cache, monkeypatch):
    from importlib.metadata import PackageNotFoundError

    def missing(name):
        raise PackageNotFoundError(name)

    monkeypatch.setattr(session_cache, "version", missing)
    session_cache.library_versions.cache_clear()
    try:
        same_as_library(fresh())
        assert is_calendar("XNYS")
        assert not cache.exists()  # nothing written, under no version's name
    finally:
        session_cache.library_versions.cache_clear()
