"""Tracks: the kinds of forecasting question (:class:`~finbench.tracks.base.Track`)."""

from __future__ import annotations

from finbench.tracks.base import Track


def open_track(config) -> Track:
    """The track a config asks for (its tasks planned; no market data read yet). Only that
    track's modules are imported (the event track's bring its store's and ingest's)."""
    if getattr(config, "track", "intraday") == "events":
        from finbench.tracks.events.track import EventsTrack

        return EventsTrack(config)
    from finbench.tracks.intraday.track import IntradayTrack

    return IntradayTrack(config)
