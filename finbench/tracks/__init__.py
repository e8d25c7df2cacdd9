"""Tracks: the kinds of forecasting question (:class:`~finbench.tracks.base.Track`)."""

from __future__ import annotations

from finbench.tracks.base import Track


def open_track(config) -> Track:
    """The track a config asks for (its tasks planned; no market data read yet)."""
    from finbench.tracks.events.track import EventsTrack
    from finbench.tracks.intraday.track import IntradayTrack

    tracks = {IntradayTrack.name: IntradayTrack, EventsTrack.name: EventsTrack}
    name = getattr(config, "track", IntradayTrack.name)
    return tracks[name](config)
