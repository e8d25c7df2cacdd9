"""Config files read as the config of the track they name (docs/spec.md §9): the TOML parsed,
its ``track`` looked up in the registry (:mod:`finbench.tracks`), the rest validated by that
track's config class, its relative paths resolved against the file's folder."""

from __future__ import annotations

import datetime as dt
import hashlib
import tomllib
from pathlib import Path

from pydantic import ValidationError

from finbench.core.config import ConfigText, format_validation_error, read_config_file
from finbench.core.errors import ConfigError
from finbench.tracks import DEFAULT_TRACK, get_track, list_tracks


def config_class(raw: object, *, name: str) -> type:
    """The config class of the track a parsed config (its TOML table) names; a ConfigError
    naming the file and listing the registered tracks when it names none of them."""
    track = raw.get("track", DEFAULT_TRACK) if isinstance(raw, dict) else DEFAULT_TRACK
    if not isinstance(track, str):
        raise ConfigError(f"{name}: key 'track': a track's name is text (given {track!r})")
    try:
        return get_track(track).config_class
    except ConfigError as exc:
        raise ConfigError(f"{name}: key 'track': {exc}") from None


def parse_config(text: str, folder: Path, *, name: str):
    """A config from TOML text, its relative paths resolved against ``folder``."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{name}: not valid TOML ({exc})") from exc
    kind = config_class(raw, name=name)
    try:
        config = kind.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{name}: {format_validation_error(exc)}") from None
    return config.resolved(Path(folder))


def validated(data: dict, *, name: str = "config"):
    """A config from its recorded form (a manifest's ``config``: paths already absolute)."""
    return config_class(data, name=name).model_validate(data)


def load_config(path: str | Path):
    """Read and validate a TOML config (docs/spec.md §9); relative paths resolve against its
    folder. A :class:`~finbench.core.errors.ConfigError` names the file, the key and the
    rule broken."""
    return load_config_file(path)[0]


def load_config_file(path: str | Path | ConfigText):
    """:func:`load_config`, the SHA-256 of the file's bytes and its text (a run keeps both,
    so the config can be checked against its hash)."""
    if isinstance(path, ConfigText):
        text, path = path.text, Path(path.path)
        raw_bytes = text.encode()
    else:
        path = Path(path)
        raw_bytes, text = read_config_file(path)
    return parse_config(text, path.parent, name=str(path)), hashlib.sha256(
        raw_bytes).hexdigest(), text


def sessions_only(config, what: str) -> None:
    """A ConfigError unless ``config``'s track splits into date shards: ``what`` (shards, a
    Dask executor) splits a run's sessions."""
    if not get_track(config.track).shardable:
        split = [t for t in list_tracks() if get_track(t).shardable]
        raise ConfigError(f"{what}: shards split a run's sessions (track "
                          f"{', '.join(map(repr, split))}); a run of track {config.track!r} "
                          "runs whole (give no --shard or --executor dask)")


def shard_config(config, start, end, horizons=None):
    """The config restricted to sessions in ``[start, end]`` (which must lie inside it) and,
    with ``horizons`` (names, or their text joined by commas: a live horizon's run), to those
    of its horizons."""
    sessions_only(config, "--shard")
    try:
        first, last = (dt.date.fromisoformat(str(x)) for x in (start, end))
    except ValueError:
        raise ConfigError(f"shard {start}:{end} is not START:END (YYYY-MM-DD:YYYY-MM-DD)") from None
    spec = config.tasks
    if first < spec.start or last > spec.end or last < first:
        raise ConfigError(f"shard {first}:{last} is not a range inside the config's "
                          f"{spec.start}:{spec.end}")
    update = {"start": first, "end": last}
    if horizons is not None:
        names = horizons.split(",") if isinstance(horizons, str) else list(horizons)
        unknown = [h for h in names if h not in spec.horizons]
        if unknown or not names:
            raise ConfigError(f"shard horizons {names}: not horizons of the config "
                              f"({', '.join(spec.horizons)})")
        update["horizons"] = {h: t for h, t in spec.horizons.items() if h in names}
    return config.model_copy(update={"tasks": spec.model_copy(update=update)})
