"""Tracks, the kinds of forecasting question, and their registry.

A track is one package, ``finbench/tracks/<name>/``, holding what is specific to it (config,
tasks, labels, gate, prompt, references, score tables, report, audit); a module of it named
here exposes ``PLUGIN``, its :class:`~finbench.tracks.base.TrackPlugin`. Shared code asks
:func:`get_track` by the name a config gives and never imports a track package itself, so a
track plugs in with one line of :data:`TRACKS` (or, from another distribution, an entry point
in the group ``finbench.tracks``; or, in a test, :func:`register`).

>>> list_tracks()
['events', 'intraday']
>>> get_track("crypto")
Traceback (most recent call last):
...
finbench.core.errors.ConfigError: track 'crypto' is not a registered track (registered: events, intraday)
"""

from __future__ import annotations

from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING

from finbench.core.errors import ConfigError

if TYPE_CHECKING:  # the seam's classes import numpy and pandas: the registry itself does not
    from finbench.tracks.base import Track, TrackPlugin

# name -> the module exposing PLUGIN (imported when the track is first asked for)
TRACKS: dict[str, str] = {
    "intraday": "finbench.tracks.intraday.plugin",
    "events": "finbench.tracks.events.plugin",
}
DEFAULT_TRACK = "intraday"  # what a config without ``track`` asks
ENTRY_POINTS = "finbench.tracks"  # the entry-point group of tracks from other distributions


def register(name: str, module: str) -> None:
    """Register the track ``name`` as the ``PLUGIN`` of ``module`` (a name taken is refused)."""
    known = _table()
    if name in known and known[name] != module:
        raise ConfigError(f"track {name!r} is registered already (by {known[name]})")
    TRACKS[name] = module


def unregister(name: str) -> None:
    """Forget a track registered by :func:`register` (a test's)."""
    TRACKS.pop(name, None)


def _table() -> dict[str, str]:
    """Every registered track: :data:`TRACKS` and the entry points of installed packages."""
    return {**dict(_entry_points()), **TRACKS}


@cache
def _entry_points() -> tuple[tuple[str, str], ...]:
    """The tracks installed packages declare (read once a process: scanning every
    distribution's metadata takes milliseconds, and what is installed does not change)."""
    from importlib.metadata import entry_points

    return tuple((e.name, e.value) for e in entry_points(group=ENTRY_POINTS))


def list_tracks() -> list[str]:
    """The names of the registered tracks, sorted."""
    return sorted(_table())


def get_track(name: str) -> TrackPlugin:
    """The plugin of the track ``name``; a ConfigError listing every registered name when
    there is none by it."""
    table = _table()
    if name not in table:
        raise ConfigError(f"track {name!r} is not a registered track (registered: "
                          f"{', '.join(sorted(table))})")
    from finbench.tracks.base import TrackPlugin

    plugin = getattr(import_module(table[name].partition(":")[0]), "PLUGIN", None)
    if not isinstance(plugin, TrackPlugin) or plugin.name != name:
        raise ConfigError(f"track {name!r}: {table[name]} has no PLUGIN, a TrackPlugin named "
                          f"{name!r}")
    return plugin


def plugin_of(config) -> TrackPlugin:
    """The plugin of the track a parsed config belongs to."""
    return get_track(config.track)


def open_track(config) -> Track:
    """The track a config asks for (its tasks planned; no market data read yet)."""
    return plugin_of(config).open(config)
