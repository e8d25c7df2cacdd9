"""The command-line parts of tracks: a module per track that adds its own arguments to the
shared ``finbench data`` commands (a store of its own to ingest or validate) and commands of
its own. The CLI imports each when it builds its parser, so such a module imports nothing
heavy at its top. A track without data commands of its own has none."""

from __future__ import annotations

import argparse
from importlib import import_module
from types import ModuleType

# track name -> its command-line module, which has ``add_arguments(parsers, data)`` (parsers:
# the shared data commands' by name; data: the ``finbench data`` subparsers) and
# ``data_command(command, args) -> int | None`` (None: the arguments are not its own)
COMMANDS: dict[str, str] = {"events": "finbench.tracks.events.commands"}


def track_commands() -> list[ModuleType]:
    """Every registered command-line module, in the order of their tracks' names."""
    return [import_module(COMMANDS[name]) for name in sorted(COMMANDS)]


def seed_argument(text: str) -> int:
    """A generator's seed: a whole number >= 0 (numpy's generators take no other)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return value
