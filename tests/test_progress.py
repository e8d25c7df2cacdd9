"""Progress lines: counts, elapsed time and ETA, at most every few seconds and at the end."""

from finbench.core.progress import Countdown


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_come_at_most_every_few_seconds_and_always_at_the_end():
    clock, lines = Clock(), []
    progress = Countdown("store", 10, lines.append, unit="partitions checked", every=2.0,
                         clock=clock)
    for step in range(10):
        clock.now += 0.5  # half a second a partition
        progress.add()
        if step == 3:
            assert lines == ["store: 4/10 partitions checked, 2.0s elapsed, ETA 3.0s"]
    assert lines == ["store: 4/10 partitions checked, 2.0s elapsed, ETA 3.0s",
                     "store: 8/10 partitions checked, 4.0s elapsed, ETA 1.0s",
                     "store: 10/10 partitions checked, 5.0s elapsed, ETA 0.0s"]


def test_counts_given_in_batches_and_no_echo():
    clock, lines = Clock(), []
    progress = Countdown("audit", 1000, lines.append, clock=clock)
    clock.now += 3.0
    progress.add(250)
    clock.now += 1.0
    progress.add(750)
    assert lines == ["audit: 250/1000, 3.0s elapsed, ETA 9.0s",
                     "audit: 1000/1000, 4.0s elapsed, ETA 0.0s"]
    silent = Countdown("audit", 2, None, clock=clock)
    silent.add(2)
    assert silent.done == 2


def test_work_done_before_counts_but_not_in_the_rate():
    clock, lines = Clock(), []
    progress = Countdown("alpaca", 100, lines.append, unit="ticker-days", done=90, every=0.0,
                         clock=clock)
    clock.now += 2.0
    progress.add()  # one ticker-day in 2 s, nine left: 18 s, not 9 / 91 * 2
    assert lines == ["alpaca: 91/100 ticker-days, 2.0s elapsed, ETA 18.0s"]
