"""runlog."""
