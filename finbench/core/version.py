"""The package version, stamped on every run."""

__version__ = "0.1.0"
