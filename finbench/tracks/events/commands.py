"""The event track's command-line part: the event store's arguments of ``finbench data
ingest`` (``--markets``, ``--prices``, ``--posts``, ...), its checks in ``finbench data
validate``, and ``finbench data synth-events``. Imported when the parser is built, so it
imports nothing heavy at its top (its handlers do, when they run)."""

from __future__ import annotations

import argparse
import sys

from finbench.core.errors import FinbenchError
from finbench.tracks.commands import seed_argument


def add_arguments(parsers: dict[str, argparse.ArgumentParser], data) -> None:
    """The event store's arguments of the shared data commands, and its own commands."""
    ingest = parsers["ingest"]
    ingest.add_argument("--markets", help="event store: markets (Polymarket Gamma JSON, or CSV/"
                        "Parquet with market_id, question, ..., outcome)")
    ingest.add_argument("--prices", help="event store: YES price histories (a folder of "
                        "<market id>.json in the CLOB /prices-history shape, or CSV/Parquet "
                        "market_id, time, price)")
    ingest.add_argument("--posts", help="event store: a dump of posts (Reddit dump format, one "
                        "JSON object a line, .zst or plain)")
    ingest.add_argument("--default-category", help="event store: category of Gamma markets "
                        "that name none")
    ingest.add_argument("--unusable", choices=("skip", "refuse"), default="skip",
                        help="event store: Gamma markets no binary question can be asked of "
                        "(open, not Yes/No, closed unresolved): skipped and counted (default) "
                        "or refused, each named")
    synth_events = data.add_parser("synth-events", help="write the synthetic event sample "
                                   "(raw files in public shapes, and the store made from them)")
    synth_events.add_argument("--out", required=True, help="the new sample's folder")
    synth_events.add_argument("--seed", type=seed_argument, default=20240301,
                              help="the generator's seed (default 20240301, the bundled "
                              "sample's)")
    synth_events.set_defaults(func=_synth)


def data_command(command: str, args: argparse.Namespace) -> int | None:
    """``ingest`` with an event store's files, or ``validate`` of an event store; None when
    the arguments are not the event store's."""
    if command == "ingest":
        if args.markets or args.posts:
            return _ingest(args)
        if args.prices:
            raise FinbenchError("data ingest: --prices goes with --markets (the markets they "
                                "price)")
        return None
    if command == "validate":
        from finbench.tracks.events.store import is_event_store

        return _validate(args) if is_event_store(args.store) else None
    return None


def _validate(args: argparse.Namespace) -> int:
    from finbench.tracks.events.store import EventStore

    events = EventStore(args.store)
    problems = events.verify()
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        print(f"{args.store}: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"{args.store}: valid event store; {len(events.manifest['files'])} files, "
          f"{len(events.post_dates())} post dates; snapshot {events.snapshot_sha256}")
    return 0


def _ingest(args: argparse.Namespace) -> int:
    """Markets (with their price histories) and/or a dump of posts into an event store."""
    from finbench.tracks.events.store import EventStore

    did = "would ingest" if args.dry_run else "ingested"
    if args.file or args.headlines:
        raise FinbenchError("data ingest: an event store takes --markets/--prices/--posts, not "
                            "bars or headlines (give them to a bar store)")
    store = EventStore.open_or_create(args.out)
    done = store.ingest(markets=args.markets, prices=args.prices, posts=args.posts,
                        default_category=args.default_category, unusable=args.unusable,
                        dry_run=args.dry_run)
    if args.markets:
        print(f"{did} {done['markets']} markets ({done['void']} void) and {done['prices']} "
              f"prices into {args.out}" + (f", replacing {done['replaced']} stored market(s)"
                                           if done["replaced"] else ""))
        if done["skipped"]:
            print(f"  skipped {sum(done['skipped'].values())} market(s) no binary question can "
                  "be asked of: " + ", ".join(f"{SKIPPED[k]} {v}"
                                             for k, v in done["skipped"].items())
                  + " (--unusable refuse names each instead)")
        if done["empty_histories"]:
            print(f"  {done['empty_histories']} price file(s) hold an empty history: their "
                  "markets have no price, and their tasks are excluded as no_price")
    if args.posts:
        print(f"{did} {done['posts']} posts of {done['dates']} date(s) from {done['file']} "
              f"(sha256 {done['sha256'][:12]}, {done['lines']} lines) into {args.out}")
    if args.dry_run:
        print("dry run: nothing was written")
    else:
        print(f"snapshot sha256 {store.snapshot_sha256}")
    return 0


SKIPPED = {"open": "still open", "not_binary": "not Yes/No (Over/Under, teams, several "
           "outcomes)", "unresolved": "closed at prices that are no resolution"}


def _synth(args: argparse.Namespace) -> int:
    from finbench.tracks.events.synth import write_event_sample

    store = write_event_sample(args.out, seed=args.seed)
    print(f"wrote the SYNTHETIC event sample to {args.out} (raw/ in the public shapes, store/ "
          f"ingested from them); snapshot {store.snapshot_sha256}")
    return 0
