"""Data of the event track (docs/spec.md §11): resolved markets with their price histories,
and a frozen snapshot of posts, in an :class:`~finbench.data.events.store.EventStore`."""
