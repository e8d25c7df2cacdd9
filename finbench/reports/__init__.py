"""What every report shares (figures and their style, table writers, the "descriptive only"
rule, the receipt ``report.json``) and the commands ``report``, ``show`` and ``paper``, which
ask the run's track for its tables, figures and views."""
