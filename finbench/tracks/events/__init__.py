"""The event track: resolved markets replayed at a cutoff against a frozen snapshot of posts
(docs/spec.md §11)."""
