"""Reports built from score tables only."""
