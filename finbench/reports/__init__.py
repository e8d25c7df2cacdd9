"""Reports from a run's stored files alone: tables, figures (each drawn on its own),
report.html and its receipt, one task shown; the commands ``report``, ``show`` and ``paper``
ask the run's track for its own."""
