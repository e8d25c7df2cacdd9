import pandas as pd
import pytest

from finbench.core.calendar import session_grid
from finbench.core.errors import CalendarError
from finbench.tracks.intraday.config import TasksConfig
from finbench.tracks.intraday.tasks import build_tasks

H3 = {"MORNING": "09:30", "MIDDAY": "12:30", "CLOSE": "15:30"}


def instants(day, **kw):
    t = session_grid(day, day, horizons=H3, **kw).table
    return t.set_index("horizon")


def test_winter_morning_is_1430_utc_and_target_2055():
    t = instants("2025-01-15")
    assert t.loc["MORNING", "t_forecast"] == pd.Timestamp("2025-01-15 14:30", tz="UTC")
    assert t.loc["MIDDAY", "t_forecast"] == pd.Timestamp("2025-01-15 17:30", tz="UTC")
    assert t.loc["CLOSE", "t_target"] == pd.Timestamp("2025-01-15 20:55", tz="UTC")


def test_after_dst_switch_morning_is_1330_utc():
    t = instants("2025-03-10")
    assert t.loc["MORNING", "t_forecast"] == pd.Timestamp("2025-03-10 13:30", tz="UTC")
    assert t.loc["MORNING", "t_target"] == pd.Timestamp("2025-03-10 19:55", tz="UTC")


def test_early_close_skipped_by_default_for_every_horizon():
    t = instants("2024-11-29")
    assert list(t["excluded"]) == ["early_close"] * 3


def test_early_close_shift_moves_target_to_1255_and_drops_close():
    t = instants("2024-11-29", early_close="shift")
    assert t.loc["MORNING", "t_target"] == pd.Timestamp("2024-11-29 17:55", tz="UTC")  # 12:55 ET
    assert t.loc["MORNING", "excluded"] == "" and t.loc["MIDDAY", "excluded"] == ""
    assert t.loc["CLOSE", "excluded"] == "early_close"


def test_national_day_of_mourning_is_no_session():
    t = session_grid("2025-01-08", "2025-01-10", horizons=H3).table
    assert sorted(t["session"].dt.strftime("%Y-%m-%d").unique()) == ["2025-01-08", "2025-01-10"]


def test_horizon_not_before_target_is_a_config_error():
    with pytest.raises(CalendarError, match="horizons.LATE"):
        session_grid("2025-01-15", "2025-01-15", horizons={"LATE": "16:00"})


def test_tasks_count_exclusions_by_reason():
    spec = TasksConfig(tickers=["AAPL", "MSFT"], start="2024-11-27", end="2024-12-02")
    ts = build_tasks(spec)
    assert len(ts.tasks) == 2 * 2 * 3  # 27 Nov and 2 Dec; 28 Nov is Thanksgiving
    assert ts.excluded_counts() == {"early_close": 6}  # 29 Nov, 2 tickers x 3 horizons
    assert ts.tasks["task_id"].iloc[0] == "AAPL|2024-11-27|MORNING"


def test_dates_without_a_session_give_no_tasks_of_the_same_types():
    """A weekend gives no tasks, typed as tasks are (text, UTC instants): joined to tasks of
    other dates (a run's history), the instants stay instants, not objects that pandas warns
    about when they are turned into numbers."""
    spec = TasksConfig(tickers=["AAPL", "MSFT"], start="2025-01-17", end="2025-01-21")
    none = build_tasks(spec, start="2025-01-18", end="2025-01-19")
    some = build_tasks(spec)
    assert none.tasks.empty and none.excluded.empty and len(some.tasks) == 2 * 2 * 3
    assert none.tasks.dtypes.to_dict() == some.tasks.dtypes.to_dict()
    assert none.excluded.dtypes.to_dict() == build_tasks(
        spec, start="2024-11-29", end="2024-11-29").excluded.dtypes.to_dict()
    joined = pd.concat([some.tasks, none.tasks], ignore_index=True)
    assert str(joined["t_forecast"].dtype) == "datetime64[ns, UTC]"


def test_session_bounds_in_nanoseconds_are_the_calendars_opens_and_closes():
    """Around a half day (2024-11-29 closes at 13:00 ET) and a holiday (2024-11-28)."""
    from finbench.core.calendar import get_calendar

    cal = get_calendar("XNYS", pd.Timestamp("2024-11-20"), pd.Timestamp("2024-12-06"))
    sessions, opens, closes = cal.session_bounds_ns("2024-11-27", "2024-12-02")
    assert [str(s.date()) for s in sessions] == ["2024-11-27", "2024-11-29", "2024-12-02"]
    assert list(pd.to_datetime(opens, utc=True)) == list(cal.opens.loc[sessions])
    assert list(pd.to_datetime(closes, utc=True)) == list(cal.closes.loc[sessions])
    assert pd.Timestamp(int(closes[1]), tz="UTC") == pd.Timestamp("2024-11-29 18:00", tz="UTC")
    empty, none_open, _ = cal.session_bounds_ns("2024-11-28", "2024-11-28")
    assert len(empty) == len(none_open) == 0
