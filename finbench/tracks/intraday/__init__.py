"""intraday."""
