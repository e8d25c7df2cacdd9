"""The intraday track's report: its tables (CSV, Markdown, LaTeX) and figures of a run, its
page (report.html), and the paper's tables and figures pooled from several runs."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from finbench.core.errors import RunError
from finbench.core.outputs import write_atomic
from finbench.reports import figures as F
from finbench.reports.agents import agent_usage, agents_of
from finbench.reports.writers import fmt, fmt_p, with_ci, write_table
from finbench.runlog.rundir import (
    INPUTS,
    SCORED,
    check_recorded,
    finished_run,
)
from finbench.runlog.runlock import RunLock
from finbench.tracks.intraday.config import knowledge_cutoffs
from finbench.tracks.intraday.mismatch import mismatch_table
from finbench.tracks.intraday.page import write_html
from finbench.tracks.intraday.replay_claims import replay_claims
from finbench.tracks.intraday.report3 import class_tables
from finbench.tracks.intraday.report_data import (
    RunData,
    calibration_tables,
    caption_facts,
    corp_tables,
    decision,
    load_run,
    paired_table,
    pooled,
    score_table,
    skill_cells,
    task_overlap,
    tools_table,
)
from finbench.tracks.intraday.report_memory import memory_tables
from finbench.tracks.intraday.report_slices import slice_scores


def _score_display(table: pd.DataFrame, *, slice_name: str | None) -> pd.DataFrame:
    """Display columns: every skill beside the N of the rows it pairs, interval scores beside
    the N of the rows that gave an interval (``n/a`` for a forecaster that gives none)."""
    rows = []
    skill = "bss" in table and table["bss_ref"].notna().any()
    ref = table["bss_ref"].dropna().iloc[0] if skill else ""
    for r in table.to_dict("records"):
        row = {} if slice_name is None else {slice_name: r["slice"]}
        row.update({"Model": r["model"], "N": r["n"], "Ties": r["ties"],
                    "Acc.": fmt(r["accuracy"], 2),
                    "BS [95% CI]": with_ci(r["brier"], r["brier_lo"], r["brier_hi"])})
        if skill:
            row[f"BSS_{ref} [95% CI]"] = with_ci(r["bss"], r["bss_lo"], r["bss_hi"])
            row["N paired"] = _count(r["bss_n"])
        na = r["interval"] == "not_applicable"
        row.update({"N int.": "n/a" if na else r["n_interval"],
                    "Cov@80": "n/a" if na else fmt(r["coverage"], 2),
                    "Winkler@80": "n/a" if na else fmt(r["winkler"], 4)})
        if "composite_secondary" in r:
            row["Comp. (secondary)"] = fmt(r["composite_secondary"])
        row.update({"Valid": fmt(r["validity"], 2), "Note": r["flag"]})
        rows.append(row)
    return pd.DataFrame(rows)


def _count(value) -> str:
    return "undef" if value is None or pd.isna(value) else str(int(value))


ROWS_NOTE = ("N: rows whose probability is scored (valid answer, scorable label); BS and "
             "accuracy on them. BSS on the N paired rows that both the model and the reference "
             "scored. Cov@80 and Winkler@80 on the N int. rows that gave an interval; n/a: the "
             "forecaster gives no interval (scored on its probability alone). Ties: scored "
             "rows with r = 0 (y = 0).")


def _replay_tables(data: RunData, folder: Path, put, facts: str) -> None:
    """What a run's replay files claimed of their rows against FinBench's values
    (:mod:`~finbench.tracks.intraday.replay_claims`; none without claims, nor for a
    paper's pool of runs)."""
    if data.run_dir is None:
        return
    claims, disagreeing = replay_claims(data.run_dir, data.config, data.rows)
    if not len(claims):
        return
    put(claims.assign(max_abs_diff=claims["max_abs_diff"].map(
        lambda v: "" if v is None or pd.isna(v) else f"{v:.3g}")), "replay_claims",
        "What each replay file claimed of its rows (its own y, r, brier, log_loss, winkler, "
        "composite_score) against FinBench's values: rows claiming it, those that disagree "
        "(beyond 1e-9 + 1e-6 x |FinBench's|; y exactly; a row FinBench does not score "
        "disagrees), the largest difference and the first tasks; every such row in "
        f"replay_disagreements.csv. Claims never change a score. {facts}", raw=claims)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / "replay_disagreements.csv", partial(
        disagreeing.to_csv, index=False, lineterminator="\n"))


def build_tables(data: RunData, folder: Path) -> dict[str, pd.DataFrame]:
    """Write every table of one run into ``folder``; returns the raw tables by name."""
    facts = caption_facts(data)
    level = f"{data.config.report.level:.0%}"
    ci_note = (f"CIs: {level} percentile bootstrap over whole {data.config.report.cluster}s "
               f"({data.config.report.bootstrap_replicates} replicates, seed "
               f"{data.config.report.seed}); undef where fewer than two clusters.")
    tables: dict[str, pd.DataFrame] = {}
    shown: dict[str, tuple[pd.DataFrame, str]] = {}  # what each table shows, for report.html

    def put(frame: pd.DataFrame, name: str, caption: str, raw=None) -> None:
        write_table(frame, folder, name, caption, raw=raw)
        shown[name] = (frame, caption)

    classes = data.scores3
    if classes is not None and not classes.empty:
        if data.class_bins is None:  # a single run: intervals and bins from its rows
            classes, bins3 = class_tables(data)
        else:  # pooled runs: each run's, named after it
            bins3 = data.class_bins
        if not bins3.empty:
            folder.mkdir(parents=True, exist_ok=True)
            write_atomic(folder / "reliability3_bins.csv", partial(
                bins3.to_csv, index=False, float_format="%.10g", lineterminator="\n"))
        tables["reliability3_bins"] = bins3
        put(_class_display(classes), "scores_three_class",
            "Three classes (down, flat, up), per model and slice: N scored, multiclass Brier "
            "(sum over classes), log loss, ranked probability score, accuracy, validity, the "
            "excluded probability mass of valid rows (mean / median / max) and rows a minimum "
            "mass rule made invalid; BSS3 and RPSS3 against each three-class baseline on the "
            f"paired rows both scored (N beside). {ci_note} {facts}", raw=classes)
        tables["scores_three_class"] = classes
    if not data.models:  # three-class models alone: no binary tables
        tables["_shown"] = shown
        return tables
    by_h = score_table(data, slice_kind="horizon")
    overall = score_table(data, slice_kind="overall")
    by_t = score_table(data, slice_kind="ticker")
    put(_score_display(by_h, slice_name="Horizon"), "scores_by_horizon",
                f"Scores by horizon and model. {ROWS_NOTE} {ci_note} {facts}", raw=by_h)
    put(_score_display(overall, slice_name=None), "scores_aggregate",
                f"Scores over all horizons. {ROWS_NOTE} {ci_note} {facts}", raw=overall)
    put(_score_display(by_t, slice_name="Ticker"), "scores_by_ticker",
                f"Scores by ticker. {ROWS_NOTE} {ci_note} {facts}", raw=by_t)
    tables.update(scores_by_horizon=by_h, scores_aggregate=overall, scores_by_ticker=by_t)
    cells = skill_cells(data)
    if len(cells):
        write_table(cells.assign(**{c: cells[c].map(fmt) for c in ("brier", "brier_ref", "bss")}),
                    folder, "skill_ticker_horizon", "Brier skill of each model against its "
                    "reference by ticker and horizon (the skill heatmap's cells): 1 - sum of "
                    "the model's Brier over the sum of the reference's, on the n tasks of the "
                    "cell both scored (mean scores beside); undef where the reference scored 0. "
                    f"No interval: a cell of few sessions says little. {facts}", raw=cells)
    tables["skill_ticker_horizon"] = cells
    cutoffs = knowledge_cutoffs(data.config)
    if cutoffs:
        by_c = score_table(data, slice_kind="cutoff")
        by_c = by_c[by_c["validity"].notna()].reset_index(drop=True)  # cells a model has rows in
        declared = "; ".join(f"{k} {v}" for k, v in cutoffs.items())
        put(_score_display(by_c, slice_name="Cutoff"), "scores_by_cutoff",
                    "Scores on each side of the models' knowledge cutoffs (" + declared + "): "
                    "on a session up to its cutoff a model may have seen the outcome in "
                    "training, so its scores there are possibly memorised, not forecasts. "
                    "Baselines and models without a cutoff: 'no cutoff declared'. Skill is "
                    f"paired on the same tasks. {ROWS_NOTE} {ci_note} {facts}", raw=by_c)
        tables["scores_by_cutoff"] = by_c
    memory_tables(data, put, tables, ci_note, facts)
    _slice_table(data, put, tables, ci_note, facts)
    _replay_tables(data, folder, put, facts)
    for metric in ("brier", "winkler"):
        paired = paired_table(data, metric=metric)
        show = pd.DataFrame([{
            "Model A": r["model_a"], "Model B": r["model_b"], "N": r["n"],
            "Sessions": r["sessions"],
            f"mean {metric} A - B [95% CI]": with_ci(r["diff"], r["diff_lo"], r["diff_hi"], 4),
            **_inference_cells(r), "Note": r["flag"]} for r in paired.to_dict("records")])
        put(show, f"paired_{metric}",
                    f"Paired differences in mean {metric} on the rows both models scored "
                    f"(two-sided bootstrap p). {INFERENCE_NOTE} {ci_note} {facts}", raw=paired)
        tables[f"paired_{metric}"] = paired
    if data.run_dir is not None:  # (pooled runs: none)
        _agent_tables(data, put, tables, ci_note, facts)
        _variant_tables(data, put, tables, ci_note, facts)
    summary, bins = calibration_tables(data)
    show = summary.assign(**{c: summary[c].map(lambda v: fmt(v, 4)) for c in
                             ("brier", "brier_binned", "reliability", "resolution",
                              "uncertainty", "ece")}) if len(summary) else summary
    put(show, "calibration",
                "Murphy decomposition (binned Brier = reliability - resolution + uncertainty) "
                f"and ECE, {data.config.report.bins} equal-width and equal-mass bins. {facts}",
                raw=summary)
    if not bins.empty:
        write_atomic(folder / "reliability_bins.csv", partial(
            bins.to_csv, index=False, float_format="%.10g", lineterminator="\n"))
    tables.update(calibration=summary, reliability_bins=bins)
    _corp_table(data, put, tables, folder, facts)
    mismatch = mismatch_table(data)
    if not mismatch.empty:
        show = pd.DataFrame([{
            "Model": r["model"], "N": r["n"], "With rationale": r["with_rationale"],
            "Up / down / neutral": f"{r['up']} / {r['down']} / {r['neutral']}"
            + (f" ({r['unjudged']} unjudged)" if r["unjudged"] else ""),
            "Stated": r["stated"], "Mismatched": r["mismatched"],
            "Rate": fmt(r["mismatch_rate"], 3),
            "BS mismatched [95% CI] (n)": with_ci(r["brier_mismatched"], r["brier_mismatched_lo"],
                                                  r["brier_mismatched_hi"])
            + f" ({r['n_mismatched']})",
            "BS matched [95% CI] (n)": with_ci(r["brier_matched"], r["brier_matched_lo"],
                                               r["brier_matched_hi"]) + f" ({r['n_matched']})",
            "Note": r["flag"]} for r in mismatch.to_dict("records")])
        method = mismatch["method"].iloc[0]
        how = (f"the documented lexicon ({method}, finbench/scoring/stance.py)"
               if method.startswith("lexicon") else
               f"a judge model ({method}; its answers in stances.jsonl)")
        put(show, "rationale_mismatch",
            f"Rationale-probability mismatch on scored rows: the rationale's stance by {how} "
            "against the side of p_up; mismatched: an 'up' rationale with p_up < 0.5 or a "
            "'down' one with p_up > 0.5; rate among rows whose rationale takes a side. "
            f"{ci_note} {facts}", raw=mismatch)
        tables["rationale_mismatch"] = mismatch
    kelly, paths = decision(data)
    show = pd.DataFrame([{
        "Model": r["model"], "Bets": r["bets"], "Sessions": r["sessions"],
        "Growth / session": "ruin" if r["ruin"] else fmt(r["growth_rate"], 4),
        "Final log wealth": f"ruin ({r['ruin']})" if r["ruin"] else fmt(r["final_log_wealth"], 4),
        "Max drawdown": fmt(r["max_drawdown"], 4), "Note": r["flag"]}
        for r in kelly.to_dict("records")])
    put(show, "decision_kelly",
                "Decision layer (apart from forecast scores): a Kelly bettor at even odds. All "
                "bets of a session resolve together at its target, so they are sized on the "
                "wealth before the session: of K tasks asked that session each stakes "
                "(2p - 1)/K (an unscored one stakes nothing); log wealth grows by "
                "ln(1 + (1/K) sum (2p - 1)(2y - 1)) per session. Growth rate: mean per session. "
                f"Ruin: every stake of a session lost (certain, wrong answers). {facts}",
                raw=kelly)
    tables.update(decision_kelly=kelly)
    tables["_wealth_paths"] = paths
    tables["_shown"] = shown
    return tables


def _agent_tables(data: RunData, put, tables: dict, ci_note: str, facts: str) -> None:
    """What the run's agents did (tool calls, turns, refusals, answers citing what a search
    answered) and what their tools add against the same model without them."""
    agents = [a for a in agents_of(data.config) if a in data.models]
    if not agents:
        return
    usage = agent_usage(data.run_dir, agents)
    put(pd.DataFrame([{
        "Model": r["model"], "Tasks": r["tasks"], "Tool calls / task": fmt(r["calls_per_task"], 2),
        "Turns / task": fmt(r["turns_per_task"], 2),
        "Refused: future / bad arguments / unknown tool / too many":
            f"{r['refused_future']} / {r['refused_bad_arguments']} / "
            f"{r['refused_unknown_tool']} / {r['refused_too_many']}",
        "Valid": r["valid"], "Citing a search": f"{r['citing']} ({fmt(r['citing_share'], 3)})"}
        for r in usage.to_dict("records")]), "agents",
        "Agents: tool calls and model turns per task, the calls refused by kind (asked for the "
        "future, bad arguments, a tool it has not, too many items), its valid answers and those "
        "whose rationale names a headline a search answered it for that task. "
        f"{facts}", raw=usage)
    tables["agents"] = usage
    effect = tools_table(data, agents)
    if effect.empty:  # no agent's model asked without tools in the run: nothing to pair
        return
    put(pd.DataFrame([{
        "Model": r["model"], "Without tools": r["without_tools"], "N": r["n"],
        "Sessions": r["sessions"], "Brier with / without": f"{fmt(r['brier'], 4)} / "
        f"{fmt(r['brier_twin'], 4)}",
        "Brier with - without [95% CI]": with_ci(r["diff"], r["diff_lo"], r["diff_hi"], 4),
        **_inference_cells(r),
        f"BSS with - without vs {r['reference']} [95% CI]": with_ci(
            r["bss_diff"], r["bss_diff_lo"], r["bss_diff_hi"], 4),
        "Note": r["flag"]} for r in effect.to_dict("records")]), "tools_effect",
        "What tools add: each agent against the same provider's same model without tools, on "
        "the tasks both scored and its skill reference scored too (N beside): mean Brier of "
        "each, their paired difference (negative: the tools helped) and the difference of "
        f"their Brier skill (two-sided bootstrap p). {INFERENCE_NOTE} {ci_note} {facts}",
        raw=effect)
    tables["tools_effect"] = effect


SLICE_KINDS = {
    "calendar": "a calendar of announcements (event: one matched the task)",
    "groups": "a grouping of tickers",
    "volatility": "the regime of realised volatility known before the task (rv: the root mean "
                  "square of the series' last returns known before its forecast time, against "
                  "the terciles of its earlier values; each task's rv and thresholds in "
                  "slices.parquet)"}


def _slice_table(data: RunData, put, tables: dict, ci_note: str, facts: str) -> None:
    """Scores in each value of each declared slice (:func:`slice_scores`; none without)."""
    table = slice_scores(data)
    if table.empty:
        return
    declared = "; ".join(f"{s.name}: {SLICE_KINDS[s.kind]}" for s in data.config.slices)
    put(pd.DataFrame([{
        "Slice": r["slice"], "Value": r["value"], "Tasks": r["tasks"], "Model": r["model"],
        "N": r["n"], "Sessions": r["sessions"],
        "BS [95% CI]": with_ci(r["brier"], r["brier_lo"], r["brier_hi"]),
        "BSS vs reference [95% CI]": "" if pd.isna(r["bss_ref"]) else
        f"{with_ci(r['bss'], r['bss_lo'], r['bss_hi'])} vs {r['bss_ref']}",
        "N paired": _count(r["bss_n"]), "Note": r["flag"]} for r in table.to_dict("records")]),
        "scores_by_slice",
        "Scores in the slices the config declares before any label is read (" + declared
        + "): Tasks, the run's tasks of the value; N, the model's scored rows among them; the "
        "skill is paired with the model's reference on the rows of the value both scored. "
        f"{ci_note} {facts}", raw=table)
    tables["scores_by_slice"] = table


def _corp_table(data: RunData, put, tables: dict, folder: Path, facts: str) -> None:
    """The CORP decomposition per model and its diagram's points (``reliability_corp.csv``)."""
    corp, points = corp_tables(data)
    put(corp.assign(**{c: corp[c].map(lambda v: fmt(v, 4)) for c in
                       ("brier", "mcb", "dsc", "unc")}), "calibration_corp",
        "CORP reliability (Dimitriadis, Gneiting and Jordan 2021): each model's forecasts "
        "recalibrated by isotonic regression of the outcomes on them (no bins), and its Brier "
        "score decomposed exactly as MCB - DSC + UNC: MCB, the Brier score less the "
        "recalibrated forecasts' (miscalibration); DSC, the climatology's of the same rows "
        "less the recalibrated forecasts' (discrimination); UNC, the climatology's "
        "(uncertainty). Distinct: forecast values; bands: the diagram's consistency bands "
        "(outcomes drawn 500 times as if the forecasts were calibrated), drawn for at most "
        f"2,000 distinct values. {facts}", raw=corp)
    if not points.empty:
        write_atomic(folder / "reliability_corp.csv", partial(
            points.to_csv, index=False, float_format="%.10g", lineterminator="\n"))
    tables.update(calibration_corp=corp, _corp_points=points)
    curves = F.murphy_curves(data.rows, data.models)
    if len(curves):
        write_atomic(folder / "murphy_curves.csv", partial(
            curves.to_csv, index=False, float_format="%.10g", lineterminator="\n"))
    tables["_murphy"] = curves


INFERENCE_NOTE = (
    "MDE: the smallest difference the comparison could detect (two-sided, 5% level, 80% "
    "power: 2.80 times the standard error clustered as the bootstrap resamples), so no "
    "difference reads as none larger than it. DM: the Diebold-Mariano test on the sessions' "
    "mean differentials in date order (Harvey-Leybourne-Newbold form, Newey-West variance "
    "at floor(4 (T/100)^(2/9)) lags, Student's t). Holm: p "
    "adjusted over the table's rows (Holm's step-down rule).")


def _inference_cells(r: dict) -> dict:
    """A comparison row's bootstrap p, MDE and Diebold-Mariano p, each p beside its Holm
    adjustment, as the tables show them."""
    return {"p (Holm)": f"{fmt_p(r['p_value'])} ({fmt_p(r['p_holm'])})",
            "MDE 80%": fmt(r["mde"], 4),
            "DM p (Holm)": f"{fmt_p(r['dm_p'])} ({fmt_p(r['dm_p_holm'])})"}


def _variant_tables(data: RunData, put, tables: dict, ci_note: str, facts: str) -> None:
    """Each model asked in a prompt variant against the same model asked the track's own
    prompt, paired on the tasks both were asked (:mod:`finbench.reports.variants`)."""
    from finbench.reports.variants import sample_spread, variant_pairs, variant_table

    pairs = [(v, b) for v, b in variant_pairs(data.config)
             if v in data.models and b in data.models]
    if not pairs:
        return
    rep = data.config.report
    sampled = [m.name for m in data.config.models if getattr(m, "prompt", None) is not None
               and m.prompt.samples > 1]
    names = sorted({x for p in pairs for x in p})
    keep = np.isin(data.rows["model"].to_numpy(object), names)
    rows = data.rows.loc[keep, ["task_id", "model", "valid", "scored", "brier",
                                "interval_scored", "winkler"]]
    costs = pq.read_table(data.run_dir / "rows.parquet", columns=[
        "task_id", "model", "tokens", "dollars"], filters=[("model", "in", names)]).to_pandas()
    rows = rows.merge(costs, on=["task_id", "model"], how="left", validate="one_to_one")
    table = variant_table(rows, data.config, data.cluster_codes(rep.cluster)[keep],
                          replicates=rep.bootstrap_replicates, seed=rep.seed, level=rep.level,
                          min_n=rep.min_n, min_clusters=rep.min_sessions,
                          spread=sample_spread(data.run_dir, sampled),
                          series=data.cluster_codes("session")[keep])
    table = table[[(v, b) in pairs for v, b in zip(table["model"], table["base"], strict=True)]]
    put(pd.DataFrame([{
        "Model": r["model"], "Variant": r["variant"], "Against": r["base"],
        "Asked": r["asked"], "Valid / against": f"{r['valid']} / {r['valid_base']}",
        "N": r["n"], "Sessions": r["clusters"],
        "Brier / against": f"{fmt(r['brier'], 4)} / {fmt(r['brier_base'], 4)}",
        "Brier difference [95% CI]": with_ci(r["diff"], r["diff_lo"], r["diff_hi"], 4),
        **_inference_cells(r),
        "Winkler difference [95% CI] (N)": with_ci(r["winkler_diff"], r["winkler_lo"],
                                                   r["winkler_hi"], 4) + f" ({r['n_interval']})",
        "Sample spread of p": "n/a" if r["model"] not in sampled else fmt(r["spread"], 4),
        "Tokens / forecast": f"{fmt(r['tokens'], 0)} / {fmt(r['tokens_base'], 0)}",
        "Note": r["flag"]} for r in table.to_dict("records")]), "prompt_variants",
        "Prompt variants: each model asked in a variant (its user template, reasoning first, "
        "earlier resolved examples, repeated samples) against the same model asked the "
        "track's own prompt, on the tasks both were asked: valid answers of each, mean Brier "
        "of each on the N tasks both scored and the variant's less the other's (negative: "
        "the variant scored better; two-sided bootstrap p), the Winkler difference where "
        "both gave an interval, a sampled variant's mean standard deviation of p across its "
        f"samples, and tokens per forecast of each. {INFERENCE_NOTE} {ci_note} {facts}",
        raw=table)
    tables["prompt_variants"] = table


def _class_display(table: pd.DataFrame) -> pd.DataFrame:
    """The three-class scores as shown: every skill beside its paired N."""
    refs = [c[5:-2] for c in table.columns if c.startswith("bss3_") and c.endswith("_n")]
    rows = []
    for r in table.to_dict("records"):
        row = {"Slice": r["slice"], "Model": r["model"], "N": r["n"],
               "Brier3 [95% CI]": with_ci(r["brier"], r.get("brier_lo"), r.get("brier_hi")),
               "Log loss": fmt(r["log_loss"]),
               "RPS [95% CI]": with_ci(r["rps"], r.get("rps_lo"), r.get("rps_hi")),
               "Acc.": fmt(r["accuracy"], 2)}
        for ref in refs:
            row[f"BSS3_{ref} [95% CI] (n)"] = (
                with_ci(r[f"bss3_{ref}"], r.get(f"bss3_{ref}_lo"), r.get(f"bss3_{ref}_hi"))
                + f" ({int(r[f'bss3_{ref}_n'])})")
            row[f"RPSS3_{ref}"] = fmt(r[f"rpss3_{ref}"])
        row.update({"Valid": fmt(r["validity"], 2),
                    "Excluded mass": "n/a" if pd.isna(r["excluded_mass_mean"]) else "/".join(
                        fmt(r[f"excluded_mass_{k}"], 3) for k in ("mean", "median", "max")),
                    "Below min mass": r["n_below_min_mass"], "Sessions": r.get("sessions"),
                    "Note": r.get("flag", "")})
        rows.append(row)
    return pd.DataFrame(rows)


def _matches(table: pd.DataFrame, names) -> np.ndarray:
    """The rows of ``names`` (config names; a paper's pooled model ``RUN/NAME`` matches
    ``NAME``)."""
    models = table["model"].astype(str)
    masks = [((models == n) | models.str.endswith("/" + n)).to_numpy(bool) for n in names]
    return np.logical_or.reduce(masks) if masks else np.zeros(len(table), bool)


def _paper_rows(table: pd.DataFrame, names) -> np.ndarray:
    """The rows of ``names`` (:func:`_matches`); all rows without names, or when none of them
    is in the table (the models were skipped: :func:`intraday_paper` says so)."""
    mine = _matches(table, names or [])
    return mine if names and mine.any() else np.ones(len(table), bool)


def paper_tables(data: RunData, tables: dict, folder: Path) -> None:
    """The paper's Tables 1-3 (``table1_first_horizon``, ``table2_pair_by_horizon``,
    ``table3_all_horizons``) from the run's scores tables: the first horizon for the
    config's ``[report] paper_models``, its ``paper_pair`` by horizon, and every model over
    all horizons (each the scores table's rows, in its columns)."""
    if "scores_by_horizon" not in tables:
        return
    chosen = data.config.report
    by_h, overall = tables["scores_by_horizon"], tables["scores_aggregate"]
    if not len(by_h):
        return
    facts = caption_facts(data)
    first = by_h["slice"].iloc[0]
    one = by_h[(by_h["slice"] == first).to_numpy(bool) & _paper_rows(by_h, chosen.paper_models)]
    write_table(_score_display(one, slice_name=None), folder, "table1_first_horizon",
                f"The {first} horizon, per model (the paper's Table 1). {ROWS_NOTE} {facts}",
                raw=one)
    if chosen.paper_pair:
        pair = by_h[_paper_rows(by_h, chosen.paper_pair)]
        write_table(_score_display(pair, slice_name="Horizon"), folder,
                    "table2_pair_by_horizon", f"{chosen.paper_pair[0]} and "
                    f"{chosen.paper_pair[1]} by horizon (the paper's Table 2). {ROWS_NOTE} "
                    f"{facts}", raw=pair)
    write_table(_score_display(overall, slice_name=None), folder, "table3_all_horizons",
                "Every model over all horizons (the paper's Table 3); a model asked some "
                "horizons only is "
                f"scored on those (its N). {ROWS_NOTE} {facts}", raw=overall)


def build_figures(data: RunData, tables: dict, folder: Path, *, paper: bool = False
                  ) -> F.FigureSet:
    """Draw every figure (PNG and PDF) of one run into ``folder``; one that fails is recorded
    in the returned set and the others are drawn. ``paper``: Figures 1 and 3 as the config's
    ``[report]`` chooses them for the paper (its models, its pair, the composite)."""
    figs = F.FigureSet(folder, models=data.models)
    bins3 = tables.get("reliability3_bins")
    if bins3 is not None and not bins3.empty:
        figs.draw("reliability_three_class", F.plot_class_reliability, bins3)
    if "scores_by_horizon" not in tables:  # no binary scores to draw
        return figs
    by_h = tables["scores_by_horizon"]
    first = by_h[by_h["slice"] == by_h["slice"].iloc[0]] if len(by_h) else by_h
    name = by_h["slice"].iloc[0] if len(by_h) else ""
    synthetic = " (SYNTHETIC data)" if data.manifest["data"]["synthetic"] else ""
    chosen = data.config.report
    across = by_h
    if paper:
        first = first[_paper_rows(first, chosen.paper_models)]
        if chosen.paper_pair:
            across = by_h[_paper_rows(by_h, chosen.paper_pair)]
    if paper and chosen.paper_composite:  # the paper's composite in place of skill and Brier
        figs.draw("fig1_skill_by_model", F.plot_skill_by_model, first.assign(
            bss=first["composite_secondary"], bss_lo=np.nan, bss_hi=np.nan, bss_n=first["n"]),
            title=f"{name}{synthetic}", ylabel="composite (secondary; higher is better)\n"
                                               "(n: rows scored)")
        figs.draw("fig3_models_across_horizons", F.plot_across_horizons, across,
                  metric="composite_secondary")
    else:
        if "bss" in first:  # skill needs a reference: a run without baselines has none
            figs.draw("fig1_skill_by_model", F.plot_skill_by_model, first,
                      title=f"{name}{synthetic}")
        figs.draw("fig3_models_across_horizons", F.plot_across_horizons, across)
    if "bss" in by_h:
        figs.draw("skill_by_horizon", F.plot_skill_by_horizon, by_h)
    figs.draw("fig2_brier_vs_coverage", F.plot_brier_vs_coverage, by_h)
    bins = tables["reliability_bins"]
    if len(bins):
        figs.draw("reliability", F.plot_reliability_sharpness,
                  bins[bins["binning"] == "uniform"])
    curves = tables.get("_murphy")
    if curves is not None and len(curves):
        figs.draw("murphy", F.plot_murphy, curves)
    points = tables.get("_corp_points")
    if points is not None and len(points):
        figs.draw("reliability_corp", F.plot_corp_reliability, points,
                  tables["calibration_corp"])
    cells = tables.get("skill_ticker_horizon")
    if cells is not None and len(cells):
        figs.draw("skill_heatmap", F.plot_skill_heatmap, cells,
                  horizons=list(data.config.tasks.horizons))
    figs.draw("coverage_by_horizon", F.plot_coverage_by_horizon, by_h)
    figs.draw("width_by_horizon", F.plot_width_by_horizon, by_h)
    figs.draw("kelly_wealth", F.plot_wealth, tables["_wealth_paths"])
    return figs


def intraday_report(run_dir: Path) -> tuple[list[Path], F.FigureSet]:
    """The intraday track's report of a run (:func:`report`): its tables, figures and page."""
    data = load_run(run_dir)
    shown = build_tables(data, run_dir / "tables")
    figs = build_figures(data, shown, run_dir / "figures")
    write_html(run_dir, data, shown["_shown"], figs.paths)
    return sorted((run_dir / "tables").iterdir()), figs


def intraday_paper(run_dirs: list, labels: list[str], out: Path, *,
                   allow_different_tasks: bool, echo) -> list[Path]:
    """The intraday track's :func:`paper`: its runs' tables and figures, pooled."""
    datas = []
    for r in run_dirs:  # read while no writer changes the run
        with RunLock(d := finished_run(r), command="finbench paper", shared=True):
            check_recorded(d, INPUTS + SCORED)
            datas.append(load_run(r))
    data = datas[0]
    if len(datas) > 1:
        overlap = task_overlap(datas, labels)
        if overlap is not None and not allow_different_tasks:
            raise RunError(f"the runs have different task sets ({overlap}): their models would "
                           "be scored side by side on different tasks; give "
                           "--allow-different-tasks to put them on one table anyway")
        if overlap is not None:
            echo(f"task sets differ: {overlap}; each skill is computed within its own run")
        data = pooled(datas, labels)
        parts = [(label, *class_tables(d)) for d, label in zip(datas, labels, strict=True)
                 if d.scores3 is not None and not d.scores3.empty]
        if parts:
            data.scores3 = pd.concat([t.assign(model=f"{label}/" + t["model"])
                                      for label, t, _ in parts], ignore_index=True)
            data.class_bins = pd.concat([b.assign(model=f"{label}/" + b["model"])
                                         for label, _, b in parts], ignore_index=True)
    out = Path(out)
    tables = build_tables(data, out / "tables")
    chosen, by_h = data.config.report, tables.get("scores_by_horizon")
    for key, names in (("paper_models", chosen.paper_models), ("paper_pair", chosen.paper_pair)):
        if names and by_h is not None and len(by_h) and not _matches(by_h, names).any():
            echo(f"report.{key}: none of {', '.join(names)} is in the runs (skipped?): the "
                 "paper's tables and figures show every model")
    paper_tables(data, tables, out / "tables")
    figs = build_figures(data, tables, out / "figures", paper=True)
    figs.check()
    return figs.paths
