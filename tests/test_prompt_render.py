"""Prompts rendered for a whole batch from the gate's arrays equal, character for character,
each task's prompt rendered from its own context frames with pandas (tests/reference.py): on
every sample task (a DST change and early closes included), anonymized or not, shifted
targets and another alpha."""

import pytest

from finbench.data.store import Store
from finbench.tracks.intraday.config import TasksConfig
from finbench.tracks.intraday.gate import ContextIndex
from finbench.tracks.intraday.prompt import PromptSettings
from finbench.tracks.intraday.tasks import build_tasks
from tests.reference import naive_messages, naive_messages_each

NAMES = (("AAPL", ("Apple",)), ("MSFT", ("Microsoft",)), ("NVDA", ("Nvidia",)))


@pytest.fixture(scope="module")
def index(sample_store):
    store = Store(sample_store)
    tasks = build_tasks(TasksConfig(tickers=["AAPL", "MSFT", "NVDA"], start="2024-09-20",
                                    end="2025-01-15", early_close="shift")).tasks
    return ContextIndex(tasks, store.read_bar_arrays(), store.read_headlines(),
                        previous_sessions=5, headline_hours=24, max_headlines=20)


@pytest.fixture(scope="module")
def contexts(index):
    """Every task's context, built once for the renderings compared with them."""
    return [index.context(i) for i in range(len(index))]


@pytest.mark.parametrize("settings", [
    (PromptSettings(), PromptSettings(target="15:55", alpha=0.1)),
    (PromptSettings(names=NAMES).anonymized(),),
], ids=["default-and-alpha", "anonymized"])
def test_batch_prompts_equal_the_naive_rendering_of_every_task(index, contexts, settings):
    """Each settings' batch rendering against the naive one, task by task (settings that
    show the same bars, sessions and headlines share the naive rendering of those)."""
    got = [s.messages(index) for s in settings]
    assert all(len(g) == len(index) == len(contexts) == 714 for g in got)  # early closes kept
    for i, context in enumerate(contexts):
        want = naive_messages_each(context, settings)
        assert [g[i] for g in got] == want, index.tasks["task_id"][i]


def test_a_batch_of_some_tasks_gives_their_prompts(index):
    rows = [5, 300, 701, 2]
    part = index.take(rows)
    assert PromptSettings().messages(part) == [naive_messages(index.context(i)) for i in rows]
