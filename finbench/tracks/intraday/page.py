"""``RUN/report.html``: one self-contained page a person opens in a browser (no network: styles,
script, figures and data are inside it). The leaderboard with CIs and paired N, every table of
the report with its caption, the figures, and a per-sample browser: filter by model, ticker,
horizon, outcome and answer status; each sample shows the prompt as sent, the answer, the
rationale, the label and the row's scores."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from finbench.core.config import PROMPTED_KINDS
from finbench.core.outputs import write_text
from finbench.reports.writers import json_number
from finbench.runlog.transcripts import Transcripts
from finbench.tracks.intraday.report_data import RunData

MAX_SAMPLES = 20_000  # rows in the browser (the first, in the run's order); the rest counted
MAX_PROMPTS = 2_000   # of them, the language-model rows whose prompt text is embedded
ORDER = ("scores_aggregate", "scores_three_class", "scores_by_horizon", "scores_by_cutoff", "paired_brier",
         "paired_winkler", "tools_effect", "agents", "calibration", "rationale_mismatch",
         "decision_kelly", "scores_by_ticker")
TITLES = {"scores_aggregate": "Leaderboard", "tools_effect": "What tools add"}


def write_html(run_dir: Path, data: RunData, shown: dict, figures: list[Path]) -> Path:
    """Write ``run_dir/report.html`` from the tables as shown (name → (frame, caption)), the
    figures' PNG files and the run's rows; returns its path."""
    samples, left_out = _samples(run_dir, data)
    synthetic = data.manifest["data"].get("synthetic")
    parts = [f"<h1>FinBench report: {html.escape(data.name)}</h1>"]
    if synthetic:
        parts.append('<p class="warn">SYNTHETIC data: not real market data.</p>')
    parts.append('<nav>' + " ".join(f'<a href="#{n}">{_title(n)}</a>'
                                    for n in ORDER if n in shown)
                 + ' <a href="#figures">figures</a> <a href="#samples">samples</a></nav>')
    for name in ORDER:
        if name in shown:
            frame, caption = shown[name]
            parts.append(f'<section id="{name}"><h2>{html.escape(_title(name))}</h2>'
                         f'{_table(frame, name)}<p class="caption">{html.escape(caption)}</p>'
                         "</section>")
    parts.append('<section id="figures"><h2>Figures</h2>' + "".join(
        f'<figure><img alt="{p.stem}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode()}"><figcaption>{p.stem}</figcaption>'
        "</figure>" for p in figures if p.suffix == ".png") + "</section>")
    note = (f" The first {MAX_SAMPLES} of {MAX_SAMPLES + left_out} rows are here."
            if left_out else "")
    parts.append(f'<section id="samples"><h2>Samples</h2><p>Every forecast row of the run, one '
                 f'per task and model.{note} Pick a row to see what the model was sent and '
                 f'what it answered.</p>{SAMPLE_CONTROLS}<div id="count"></div>'
                 '<table id="sample-list"><thead><tr><th>task</th><th>model</th><th>p_up</th>'
                 '<th>interval</th><th>outcome</th><th>answer</th><th>Brier</th></tr></thead>'
                 '<tbody></tbody></table><pre id="detail"></pre></section>')
    # every "<" escaped: a model's text holding "</script>" or "<!--<script>" would end or
    # swallow the data block and the page's script after it
    data_json = json.dumps(samples, allow_nan=False, ensure_ascii=False).replace("<", "\\u003c")
    page = (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>FinBench "
            f"{html.escape(data.name)}</title><style>{STYLE}</style></head><body>"
            + "".join(parts)
            + f'<script type="application/json" id="sample-data">{data_json}</script>'
            + f"<script>{SCRIPT}</script></body></html>")
    path = run_dir / "report.html"
    write_text(path, page)
    return path


def _title(name: str) -> str:
    return TITLES.get(name) or name.replace("_", " ").capitalize()


def _table(frame: pd.DataFrame, name: str) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
                   for row in frame.itertuples(index=False))
    return (f'<table class="data" id="table-{name}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


def _samples(run_dir: Path, data: RunData) -> tuple[list[dict], int]:
    """The browser's rows (plain values) and how many were left out."""
    rows = data.rows
    left_out = max(0, len(rows) - MAX_SAMPLES)
    rows = rows.iloc[:MAX_SAMPLES]
    columns = ["task_id", "model", "kind", "raw", "error", "rationale", "answer_status"]
    parts, have = [], 0  # the same rows: both are the forecast table's first, in its order
    for batch in pq.ParquetFile(run_dir / "forecasts.parquet").iter_batches(
            batch_size=MAX_SAMPLES, columns=columns):
        parts.append(batch.slice(0, MAX_SAMPLES - have))
        have += parts[-1].num_rows
        if have >= MAX_SAMPLES:
            break
    extra = (pa.Table.from_batches(parts).to_pandas() if parts
             else pd.DataFrame(columns=columns))
    llm = set(extra.loc[extra["kind"].isin(PROMPTED_KINDS), "model"])
    prompts = _prompts(run_dir, llm, extra)
    out = []
    for r, e in zip(rows.itertuples(index=False), extra.itertuples(index=False), strict=True):
        status = "error" if e.answer_status == "error" else "valid" if r.valid else "invalid"
        outcome = ("unscorable" if r.status != "ok" else "up" if r.y == 1 else "down")
        out.append({
            "task": r.task_id, "model": r.model, "ticker": str(r.ticker),
            "horizon": str(r.horizon), "session": str(r.session), "p_up": _num(r.p_up),
            "lower": _num(r.lower), "upper": _num(r.upper), "answer": status,
            "outcome": outcome, "label_status": str(r.status), "r": _num(r.r),
            "brier": _num(r.brier), "winkler": _num(r.winkler), "log_loss": _num(r.log_loss),
            "covered": _num(r.covered), "raw": _text(e.raw), "error": _text(e.error),
            "rationale": _text(e.rationale), "messages": prompts.get((e.model, e.task_id))})
    return out, left_out


def _prompts(run_dir: Path, models: set[str], extra: pd.DataFrame) -> dict:
    """The messages of up to :data:`MAX_PROMPTS` language-model rows, by (model, task)."""
    wanted = extra[extra["model"].isin(models)].head(MAX_PROMPTS)
    found: dict = {}
    if wanted.empty:
        return found
    transcripts = Transcripts(run_dir)
    try:
        for model, task in wanted[["model", "task_id"]].itertuples(index=False):
            calls = transcripts.of(task, model)
            if calls and calls[-1].get("messages"):
                found[(model, task)] = calls[-1]["messages"]
    finally:
        transcripts.close()
    return found


def _text(value) -> str:
    return "" if value is None or pd.isna(value) else str(value)


def _num(value) -> float | str | None:
    """A cell for the page's JSON (:func:`~finbench.reports.writers.json_number`)."""
    return None if value is None or pd.isna(value) else json_number(float(value))


SAMPLE_CONTROLS = """<form id="filters">
<label>model <select name="model"></select></label>
<label>ticker <select name="ticker"></select></label>
<label>horizon <select name="horizon"></select></label>
<label>outcome <select name="outcome"></select></label>
<label>answer <select name="answer"></select></label>
</form>"""

STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table.data,#sample-list{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;font-variant-numeric:tabular-nums}
th{background:#f3f3f3}.caption{color:#555;font-size:12px}.warn{color:#a00;font-weight:bold}
nav a{margin-right:.8em}figure{display:inline-block;margin:.5em}img{max-width:560px}
#sample-list tbody tr{cursor:pointer}#sample-list tbody tr:hover{background:#eef}
#detail{white-space:pre-wrap;background:#f8f8f8;padding:1em;border:1px solid #ddd}
label{margin-right:1em}"""

SCRIPT = """(function(){
const rows = JSON.parse(document.getElementById('sample-data').textContent);
const form = document.getElementById('filters');
const keys = ['model','ticker','horizon','outcome','answer'];
for (const key of keys) {
  const select = form.elements[key];
  const values = Array.from(new Set(rows.map(r => r[key]))).sort();
  select.add(new Option('all', ''));
  for (const v of values) select.add(new Option(v, v));
  select.addEventListener('change', render);
}
const fmt = v => v === null || v === undefined ? '' : (typeof v === 'number' ? v.toFixed(4) : v);
function detail(r) {
  const lines = [`task ${r.task}  model ${r.model}`,
    `label: ${r.label_status}, r = ${fmt(r.r)}, outcome ${r.outcome}`,
    `answer: ${r.answer}${r.error ? ' (' + r.error + ')' : ''}; p_up ${fmt(r.p_up)}, ` +
      `interval [${fmt(r.lower)}, ${fmt(r.upper)}]`,
    `scores: Brier ${fmt(r.brier)}, log loss ${fmt(r.log_loss)}, Winkler ${fmt(r.winkler)}, ` +
      `covered ${fmt(r.covered)}`];
  if (r.rationale) lines.push('rationale: ' + r.rationale);
  if (r.raw) lines.push('raw answer: ' + r.raw);
  if (r.messages) for (const m of r.messages) {  // an agent's: each turn's calls, each answer
    lines.push('', m.role === 'tool' ? '[tool answer to ' + m.tool_call_id + ']'
                                     : '[' + m.role + ']');
    if (m.content) lines.push(m.content);
    for (const c of m.tool_calls || [])
      lines.push('-> ' + c.id + ': ' + (c.function || {}).name + ' ' +
                 (c.function || {}).arguments);
  }
  document.getElementById('detail').textContent = lines.join('\\n');
}
function render() {
  const want = Object.fromEntries(keys.map(k => [k, form.elements[k].value]));
  const shown = rows.filter(r => keys.every(k => !want[k] || r[k] === want[k]));
  const body = document.querySelector('#sample-list tbody');
  body.replaceChildren();
  for (const r of shown.slice(0, 500)) {
    const tr = body.insertRow();
    tr.dataset.task = r.task; tr.dataset.model = r.model;
    for (const v of [r.task, r.model, fmt(r.p_up), r.lower === null ? 'n/a' :
         `[${fmt(r.lower)}, ${fmt(r.upper)}]`, r.outcome, r.answer, fmt(r.brier)])
      tr.insertCell().textContent = v;
    tr.addEventListener('click', () => detail(r));
  }
  document.getElementById('count').textContent =
    `${shown.length} of ${rows.length} samples` + (shown.length > 500 ? ' (first 500 listed)' : '');
}
render();
})();"""
