"""Market data: validated ingest, the Parquet store, and the synthetic sample."""
