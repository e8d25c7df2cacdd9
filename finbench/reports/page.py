"""A run's ``report.html``, the same page for every track (docs/reports.md): one
self-contained file (styles, script, figures and data inside it; nothing fetched), rendered
by Jinja2 from ``templates/run.html.j2`` with every value escaped. A header says what the
run is (FinBench and its engine, the config, the data snapshot, the tasks, each model and
why one is missing); each table of the report is a section, present only when it has rows,
its numbers right-aligned and every column sortable; the sample browser filters the rows
and shows a page of them at a time.

A track gives :func:`render` its facts, its tables as shown, its figures and its samples
(each a dict with the filter keys, ``task``, ``model``, ``cells`` for the list, ``head``
lines for the detail, and ``raw``, ``rationale``, ``messages``)."""

from __future__ import annotations

import base64
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from finbench.core.version import describe_version

PAGE_ROWS = 100  # samples listed a page at a time
# a cell that begins with a number (an estimate, "0.296 (9)", "-0.01 [-0.02, 0.00]")
# a number at a text's start, not running into a letter or digit (a hash such as "07bad0..."
# begins with no number)
_NUMBER = re.compile(r"^(?>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(?![0-9A-Za-z_])")
_NOT_A_NUMBER = {"", "n/a", "undef", "nan", "none", "-", "—"}  # numeric columns' blanks


@dataclass
class Cell:
    text: str
    numeric: bool
    key: float | None  # the number a numeric column sorts by (None: sorted last)


def cells(frame: pd.DataFrame) -> tuple[list[dict], list[list[Cell]]]:
    """A table's columns (``name``, ``numeric``) and cells: a column is numeric when every
    cell begins with a number (not followed by a letter or digit: a hash is text) or is a
    blank (``n/a``, ``undef``, empty), some of them a number; its cells sort by that leading
    number."""
    texts = [["" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
              for v in frame[c]] for c in frame.columns]
    columns, grid = [], []
    for name, column in zip(frame.columns, texts, strict=True):
        keys = [_key(t) for t in column]
        numeric = any(k is not None for k in keys) and all(
            k is not None or t.strip().lower() in _NOT_A_NUMBER
            for t, k in zip(column, keys, strict=True))
        columns.append({"name": str(name), "numeric": numeric})
        grid.append([Cell(t, numeric, k if numeric else None)
                     for t, k in zip(column, keys, strict=True)])
    return columns, [list(row) for row in zip(*grid, strict=True)] if grid else []


def _key(text: str) -> float | None:
    match = _NUMBER.match(text.strip())
    if match is None:
        return None
    value = float(match.group(0))
    return value if math.isfinite(value) else None


def sections(shown: dict, order: tuple[str, ...], titles: dict[str, str]) -> list[dict]:
    """The page's tables in ``order`` (``shown``: name -> (frame, caption)), those with
    rows only."""
    out = []
    for name in order:
        if name not in shown or shown[name][0].empty:
            continue
        frame, caption = shown[name]
        columns, rows = cells(frame)
        out.append({"id": name, "title": titles.get(name) or name.replace("_", " ").capitalize(),
                    "columns": columns, "rows": rows, "caption": caption})
    return out


def run_facts(manifest: dict, *, tasks: int, extra: list[tuple[str, str]] = ()
              ) -> list[tuple[str, str]]:
    """The header's facts of a run, from its manifest."""
    data = manifest.get("data") or {}
    revision = manifest.get("git_revision")
    facts = [("run made by", f"finbench {manifest.get('package_version')} (engine "
                             f"{manifest.get('engine_version')}, scoring rules "
                             f"{manifest.get('scoring_rules_version')})"
                             + (f", revision {revision[:12]}" if revision else "")
                             + f", Python {manifest.get('python')}"),
             ("report drawn by", describe_version()),
             ("config", f"sha256 {manifest.get('config_sha256')}"),
             ("data", f"{data.get('store')}: snapshot sha256 {data.get('snapshot_sha256')}"
                      + (f" ({data.get('description')})" if data.get("description") else "")),
             ("tasks", str(tasks)), *extra,
             ("run", f"started {manifest.get('started_at')}, finished "
                     f"{manifest.get('finished_at')}")]
    return [(k, v) for k, v in facts if v]


def model_rows(manifest: dict, shown: set[str]) -> list[dict]:
    """Each model of the config: its kind, whether the report shows it, and why not (skipped,
    stopped) or its note."""
    skipped = manifest.get("skipped_models") or {}
    stopped = manifest.get("stopped_models") or {}
    notes = manifest.get("model_notes") or {}
    out = []
    for model in (manifest.get("config") or {}).get("models", []):
        name = model["name"]
        state = "skipped" if name in skipped else "stopped" if name in stopped else "shown"
        why = skipped.get(name) or stopped.get(name) or notes.get(name) or ""
        out.append({"name": name, "kind": model.get("kind", ""), "state": state,
                    "shown": "yes" if name in shown and state == "shown" else (
                        state if state != "shown" else "no"),
                    "why": why if isinstance(why, str) else "; ".join(map(str, why))
                    if isinstance(why, list) else json.dumps(why)})
    return out


def render(path: Path, *, title: str, synthetic: bool, facts, models, tables: list[dict],
           figures: list[Path], samples: list[dict], samples_note: str, filters: list[str],
           sample_columns: list[str], numeric: list[int] = ()) -> Path:
    """Write the page to ``path``; returns it. ``numeric``: the sample list's columns of
    numbers (right-aligned)."""
    import jinja2

    from finbench.core.outputs import write_text

    env = jinja2.Environment(loader=jinja2.PackageLoader("finbench.reports", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    page = env.get_template("run.html.j2").render(
        title=title, synthetic=synthetic, facts=facts, models=models, sections=tables,
        figures=[{"name": p.stem, "png": base64.b64encode(p.read_bytes()).decode()}
                 for p in figures if p.suffix == ".png"],
        samples_note=samples_note, filters=filters, sample_columns=sample_columns,
        numeric=list(numeric),
        samples_json=script_json(samples),
        sample_spec=script_json({"filters": filters, "page": PAGE_ROWS,
                                 "numeric": list(numeric)}))
    write_text(path, page)
    return path


def script_json(value) -> str:
    """JSON for a ``<script type="application/json">`` block: every ``<`` escaped, so that
    a model's text holding ``</script>`` or ``<!--<script>`` can neither end nor swallow the
    block and the page's script after it."""
    return json.dumps(value, allow_nan=False, ensure_ascii=False).replace("<", "\\u003c")


def exchanges(run_dir: Path, pairs) -> dict:
    """The messages of each (model, task) of ``pairs`` as its last call sent them (an
    agent's whole exchange), from the run's transcripts; none for a row without a call."""
    from finbench.runlog.transcripts import Transcripts

    found: dict = {}
    pairs = list(pairs)
    if not pairs:
        return found
    transcripts = Transcripts(run_dir)
    try:
        for model, task in pairs:
            calls = transcripts.of(task, model)
            if calls and calls[-1].get("messages"):
                found[(model, task)] = calls[-1]["messages"]
    finally:
        transcripts.close()
    return found
