"""report.html in Chromium: the time from navigation to the sample browser's first row drawn,
for a run's page against the pilot's page opened in the same run (the reference), three
opens each, and the page's size.

Target (issue: a report researchers want to share): the page of a 1M-row run opens in under
3 s. Run: .venv/bin/python benchmarks/bench_report_page.py RUN_DIR
(a run with its report drawn, e.g. a baselines-only year of 500 tickers over
``benchmarks/bench_scale.py``'s store: 1.12M rows).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def opens(page_path: Path, browser, times: int = 3) -> list[float]:
    """Seconds from navigation to the first sample row, a fresh page each time."""
    out, errors = [], []
    for _ in range(times):
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("pageerror", lambda e: errors.append(str(e)))
        start = time.perf_counter()
        page.goto(page_path.as_uri())
        page.wait_for_selector("#sample-list tbody tr")
        out.append(time.perf_counter() - start)
        if errors:
            raise SystemExit(f"{page_path}: {errors[0]}")
        page.close()
    return out


def main() -> None:
    import pyarrow.parquet as pq
    from playwright.sync_api import sync_playwright

    from finbench.reports.build import report
    from finbench.runner import run

    run_dir = Path(sys.argv[1])
    rows = pq.ParquetFile(run_dir / "rows.parquet").metadata.num_rows
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "pilot.toml"
        cfg.write_text((ROOT / "configs" / "pilot.toml").read_text().replace(
            '"../data/', f'"{ROOT}/data/'))
        pilot = run(cfg, Path(tmp) / "pilot", echo=lambda *_: None)
        report(pilot)
        browser_path = os.environ.get("FINBENCH_CHROMIUM") or shutil.which("chromium")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=browser_path, args=FLAGS)
            reference = opens(pilot / "report.html", browser)
            measured = opens(run_dir / "report.html", browser)
            browser.close()
    size = (run_dir / "report.html").stat().st_size
    print(f"pilot's page (reference): {statistics.median(reference):.3f} s median "
          f"({', '.join(f'{t:.3f}' for t in reference)})")
    print(f"{run_dir.name}'s page ({rows:,} rows, {size / 1e6:.1f} MB): "
          f"{statistics.median(measured):.3f} s median "
          f"({', '.join(f'{t:.3f}' for t in measured)}), "
          f"{statistics.median(measured) / statistics.median(reference):.1f}x the pilot's "
          "(target: under 3 s for a 1M-row run)")


if __name__ == "__main__":
    main()
