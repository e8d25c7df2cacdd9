"""``finbench report`` of an event run: tables (CSV, Markdown, LaTeX) and figures from its
stored scores and rows only. Every skill stands beside its N, positives and both raw scores;
a slice without a YES says so; the in-sample frequency is labelled descriptive; exclusions
are counted by reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from finbench.core.outputs import write_atomic
from finbench.reports import figures as F
from finbench.reports.agents import agent_usage, agents_of
from finbench.reports.stats import descriptive
from finbench.reports.writers import fmt_p, write_table
from finbench.runlog.rundir import load_run_config, read_manifest
from finbench.tracks.events.effects import paired_brier, retrieval_effect, tools_effect
from finbench.tracks.events.figures import (
    RELIABILITY_BINS,
    event_corp,
    event_figures,
    event_reliability,
)
from finbench.tracks.events.page import write_event_html
from finbench.tracks.events.report_slices import event_slice_tables


def _f(x: float, digits: int = 4) -> str:
    return "" if pd.isna(x) else f"{x:.{digits}f}"


def _ci(value: float, lo: float, hi: float) -> str:
    return _f(value) + ("" if pd.isna(lo) else f" [{_f(lo)}, {_f(hi)}]")


def _notes(frame: pd.DataFrame, s, *, n: str) -> np.ndarray:
    """Each row's note: no positive case, and the rule of every table (too few markets or
    event groups for its interval: descriptive only)."""
    flags = descriptive(frame[n].to_numpy(), frame["groups"].to_numpy(), min_n=s.min_n,
                        min_clusters=s.min_groups)
    cases = np.where(frame["no_positive_cases"], "no positive cases", "")
    return np.array(["; ".join(x for x in pair if x) for pair in zip(cases, flags, strict=True)],
                    dtype=object)


def _scores(frame: pd.DataFrame, s) -> pd.DataFrame:
    return pd.DataFrame({
        "model": frame["model"], "slice": frame["slice"], "n": frame["n"],
        "YES": frame["positives"],
        "Brier [95% CI, event groups]": [_ci(*v) for v in zip(
            frame["brier"], frame["brier_lo"], frame["brier_hi"], strict=True)],
        "YES penalty": frame["yes_penalty"].map(_f), "NO penalty": frame["no_penalty"].map(_f),
        "log loss": frame["log_loss"].map(_f), "validity": frame["validity"].map(_f),
        "invalid": frame["n_invalid"], "errors": frame["n_error"],
        "groups": frame["groups"], "effective events": frame["effective_events"].map(
            lambda x: f"{x:.1f}"),
        "note": [("in-sample (descriptive, not a forecast)" if k.startswith("in_sample")
                  else note) for k, note in zip(frame["kind"], _notes(frame, s, n="n"),
                                                strict=True)]})


def _skill(frame: pd.DataFrame, s) -> pd.DataFrame:
    return pd.DataFrame({
        "model": frame["model"], "reference": frame["reference"], "slice": frame["slice"],
        "n": frame["n"], "YES": frame["positives"],
        "Brier model": frame["brier_model"].map(_f),
        "Brier reference": frame["brier_reference"].map(_f),
        "BSS [95% CI, event groups]": [
            f"undefined ({u})" if u else _ci(b, lo, hi) for b, lo, hi, u in zip(
                frame["bss"], frame["bss_lo"], frame["bss_hi"], frame["bss_undefined"],
                strict=True)],
        "log-loss skill": frame["log_loss_skill"].map(_f), "groups": frame["groups"],
        "note": _notes(frame, s, n="n")})


INFERENCE_NOTE = (" MDE: the smallest difference the comparison could detect (two-sided, 5% "
                  "level, 80% power: 2.80 times the standard error clustered by event group). "
                  "Holm: p adjusted over the table's rows (Holm's step-down rule).")


def _paired_display(table: pd.DataFrame, names: tuple[str, str], briers: str, diff: str,
                    other: str) -> pd.DataFrame:
    """A paired table (:mod:`~finbench.tracks.events.effects`) as a report shows it: the two
    models (``other``: the second's column), n, groups, both mean Brier scores, the
    difference with its CI, p and Holm's p, the MDE and the note."""
    return pd.DataFrame([{
        names[0]: r["model"], names[1]: r[other], "n": r["n"], "groups": r["groups"],
        briers: f"{_f(r['brier'])} / {_f(r['brier_twin'])}",
        diff: _ci(r["diff"], r["diff_lo"], r["diff_hi"]),
        "p (Holm)": f"{fmt_p(r['p_value'])} ({fmt_p(r['p_holm'])})", "MDE 80%": _f(r["mde"]),
        "note": r["flag"]} for r in table.to_dict("records")])


def _paired_table(run_dir: Path, config, put, rule: str, source: str) -> list[Path]:
    """Every two models' paired Brier difference with its CI, p, MDE and Holm's p."""
    skipped = read_manifest(run_dir).get("skipped_models", {})
    table = paired_brier(pd.read_parquet(run_dir / "rows.parquet"), config, skipped)
    return _paired_section(put, table, "event_paired_brier", (
        ("model A", "model B"), "Brier A / B", "A - B [95% CI, event groups]", "versus"),
        "Paired differences in mean Brier: every two models on the markets both scored, "
        "resampling whole event groups (two-sided bootstrap p). Event groups have no order "
        "in time: no Diebold-Mariano test." + INFERENCE_NOTE + rule + source)


def _paired_section(put, table: pd.DataFrame, name: str, labels: tuple, caption: str
                    ) -> list[Path]:
    """A paired table as a section of the report (none without rows); ``labels``: those of
    :func:`_paired_display`."""
    if table.empty:
        return []
    return put(_paired_display(table, *labels), name, caption, raw=table)


def _slice_tables(run_dir: Path, config, put, rule: str, source: str) -> list[Path]:
    """Scores and skill in each value of each declared slice (none without)."""
    scores, skill = event_slice_tables(run_dir, config)
    if scores.empty:
        return []
    s = config.scores
    declared = "; ".join(f"{d.name} ({d.kind})" for d in config.slices)
    caption = (" in the slices the config declares before any label is read (" + declared
               + "): tasks, the run's markets of the value.")
    shown = _scores(scores, s).rename(columns={"slice": "value"})
    shown.insert(1, "slice", scores["slice_kind"].to_numpy())
    shown.insert(3, "tasks", scores["tasks"].to_numpy())
    paths = put(shown, "event_scores_by_slice", "Scores" + caption + " Brier intervals resample "
                "whole event groups." + rule + source, raw=scores)
    shown = _skill(skill, s).rename(columns={"slice": "value"})
    shown.insert(2, "slice", skill["slice_kind"].to_numpy())
    shown.insert(4, "tasks", skill["tasks"].to_numpy())
    return paths + put(shown, "event_skill_by_slice", "Brier skill against each reference" + caption
                       + " Skill is paired on the value's markets both answered validly."
                       + rule + source, raw=skill)


def _retrieval_table(run_dir: Path, config, put, rule: str, source: str) -> list[Path]:
    effect = retrieval_effect(pd.read_parquet(run_dir / "rows.parquet"), config)
    return _paired_section(put, effect, "event_retrieval_effect", (
        ("model", "without posts"), "Brier with / without",
        "with - without [95% CI, event groups]", "without_retrieval"),
        "What retrieved posts add: each model that reads them against the same model asked "
        "without them, on the markets both scored: mean Brier of each and their paired "
        "difference (negative: the posts helped), resampling whole event groups (two-sided "
        "bootstrap p)." + INFERENCE_NOTE + rule + source)


def _agent_tables(run_dir: Path, config, put, rule: str, source: str) -> list[Path]:
    """The agents' use of their tools and what the tools add (none without agents);
    ``put``: writes a table and keeps it for the page."""
    agents = agents_of(config)
    if not agents:
        return []
    usage = agent_usage(run_dir, agents)
    paths = put(usage.assign(**{c: usage[c].map(lambda v: _f(v, 2)) for c in (
        "calls_per_task", "turns_per_task", "citing_share")}), "event_agents",
        "Agents: tool calls and model turns per market, the calls refused by kind (asked for "
        "the future, bad arguments, a tool it has not, too many items), its valid answers and "
        "those whose rationale names a post or market a search answered it." + source,
        raw=usage)
    effect = tools_effect(pd.read_parquet(run_dir / "rows.parquet"), config)
    if effect.empty:  # no agent's model asked without tools in the run: nothing to pair
        return paths
    shown = _paired_display(effect, ("model", "without tools"), "Brier with / without",
                            "with - without [95% CI, event groups]", "without_tools")
    return paths + put(shown, "event_tools_effect", "What tools add: each agent "
                               "against the same provider's same model without tools, on the "
                               "markets both scored: mean Brier of each and their paired "
                               "difference (negative: the tools helped), resampling whole "
                               "event groups (two-sided bootstrap p)." + INFERENCE_NOTE
                               + rule + source, raw=effect)


MEMORY_COLUMNS = ["model", "against", "cutoff", "n_before", "groups_before", "before",
                  "before_lo", "before_hi", "n_after", "groups_after", "after", "after_lo",
                  "after_hi", "gap", "gap_lo", "gap_hi", "flag"]


def event_memorisation(rows: pd.DataFrame, tasks: pd.DataFrame, config) -> pd.DataFrame:
    """For each model declaring a ``knowledge_cutoff``: its Brier less each reference's on
    the markets both scored, for markets resolved up to its cutoff (the outcome may be in
    its training data) and after it, each with its CI, and the gap after less before
    (each side's event groups resampled within it)."""
    from finbench.scoring.bootstrap import gap_ci
    from finbench.tracks.events.config import reference_names

    s = config.scores
    resolved = tasks.set_index("task_id")["resolved_at"]
    scored = rows[rows["scored"].to_numpy(bool)]
    out = []
    for m in config.models:
        cutoff = getattr(m, "knowledge_cutoff", None)
        if cutoff is None or m.name not in set(scored["model"]):
            continue
        for ref in reference_names(config):
            both = scored[scored["model"] == m.name].merge(
                scored[scored["model"] == ref][["task_id", "brier"]], on="task_id",
                suffixes=("", "_ref"))
            if both.empty:
                continue
            d = both["brier"].to_numpy(float) - both["brier_ref"].to_numpy(float)
            day = resolved.reindex(both["task_id"]).dt.tz_convert("UTC").dt.date
            before = (day <= cutoff).to_numpy(bool)
            groups = pd.factorize(both["event_group"], sort=True)[0]
            a, b, gap = gap_ci(d[before], groups[before], d[~before], groups[~before],
                               replicates=s.bootstrap_replicates, seed=s.seed, level=s.level)
            out.append({"model": m.name, "against": ref, "cutoff": cutoff.isoformat(),
                        "n_before": a.n, "groups_before": a.clusters, "before": a.estimate,
                        "before_lo": a.lower, "before_hi": a.upper, "n_after": b.n,
                        "groups_after": b.clusters, "after": b.estimate, "after_lo": b.lower,
                        "after_hi": b.upper, "gap": gap.estimate, "gap_lo": gap.lower,
                        "gap_hi": gap.upper,
                        "flag": descriptive(min(a.n, b.n), min(a.clusters, b.clusters),
                                            min_n=s.min_n, min_clusters=s.min_groups)})
    return pd.DataFrame(out, columns=MEMORY_COLUMNS)


def _memorisation_table(run_dir: Path, config, put, rule: str, source: str) -> list[Path]:
    if not any(getattr(m, "knowledge_cutoff", None) for m in config.models):
        return []
    paths = _probe_table(run_dir, config, put, rule, source)
    table = event_memorisation(pd.read_parquet(run_dir / "rows.parquet"),
                               pd.read_parquet(run_dir / "tasks.parquet"), config)
    shown = pd.DataFrame([{
        "model": r["model"], "against": r["against"], "cutoff": r["cutoff"],
        "before: n (groups)": f"{r['n_before']} ({r['groups_before']})",
        "before: Brier difference [95% CI]": _ci(r["before"], r["before_lo"], r["before_hi"]),
        "after: n (groups)": f"{r['n_after']} ({r['groups_after']})",
        "after: Brier difference [95% CI]": _ci(r["after"], r["after_lo"], r["after_hi"]),
        "gap after - before [95% CI]": _ci(r["gap"], r["gap_lo"], r["gap_hi"]),
        "note": r["flag"]} for r in table.to_dict("records")])
    return paths + put(shown, "event_memorisation", "Memorisation: each model that declares a "
               "knowledge cutoff, its mean Brier less each reference's on the markets both "
               "scored, for markets resolved up to its cutoff (the outcome may be in its "
               "training data) and after it, and the gap after less before: better than the "
               "reference before the cutoff but not after (a positive gap) is what memorised "
               "outcomes look like. Each side's event groups are resampled within it."
               + rule + source, raw=table)


def _probe_table(run_dir: Path, config, put, rule: str, source: str) -> list[Path]:
    """The recall probes before and after each probed model's cutoff, by the day its market
    resolved (none without ``probes.parquet``)."""
    from finbench.reports.probes import CAPTION, probe_display, probe_table
    from finbench.runlog.rundir import PROBES as TABLE

    if not (run_dir / TABLE).is_file():
        return []
    probes = pd.read_parquet(run_dir / TABLE, columns=["task_id", "model", "p_up", "valid"])
    labels = pd.read_parquet(run_dir / "labels.parquet", columns=[
        "task_id", "y", "status", "event_group", "resolved_at"])
    cutoffs = {m.name: m.knowledge_cutoff for m in config.models
               if getattr(m, "knowledge_cutoff", None) is not None}
    s = config.scores
    table = probe_table(probes, pd.DataFrame({
        "task_id": labels["task_id"],
        "y": labels["y"].astype(float).where(labels["status"] == "ok"),
        "cluster": pd.factorize(labels["event_group"], sort=True)[0],
        "day": labels["resolved_at"].dt.tz_convert("UTC").dt.strftime("%Y-%m-%d")}),
        cutoffs, replicates=s.bootstrap_replicates, seed=s.seed, level=s.level, min_n=s.min_n,
        min_clusters=s.min_groups)
    return put(probe_display(table, "groups"), "event_recall_probes", CAPTION + " Markets "
               "fall before or after the cutoff by the day they resolved; event groups are "
               "resampled." + rule + source, raw=table)


def _min_k_table(run_dir: Path, config, put, rule: str, source: str) -> list[Path]:
    """Skill against the market's price (else the first reference) within terciles of
    Min-K% (none without ``min_k.parquet``)."""
    from finbench.reports.min_k import CAPTION, min_k_display, min_k_table
    from finbench.runlog.rundir import MIN_K
    from finbench.tracks.events.config import REFERENCE_KINDS

    refs = [m for m in config.models if m.kind in REFERENCE_KINDS]
    if not (run_dir / MIN_K).is_file() or not refs:
        return []
    ref = next((m.name for m in refs if m.kind == "market_price"), refs[0].name)
    scores = pd.read_parquet(run_dir / MIN_K, columns=["task_id", "model", "k", "min_k"])
    rows = pd.read_parquet(run_dir / "rows.parquet", columns=[
        "task_id", "model", "scored", "brier", "event_group"])
    rows = rows[rows["scored"].to_numpy(bool)]
    theirs = rows[rows["model"] == ref][["task_id", "brier"]].rename(
        columns={"brier": "brier_ref"})
    pairs = rows[rows["model"] != ref].merge(theirs, on="task_id").assign(reference=ref)
    pairs["cluster"] = pd.factorize(pairs["event_group"], sort=True)[0]
    s = config.scores
    table = min_k_table(scores, pairs, replicates=s.bootstrap_replicates, seed=s.seed,
                        level=s.level, min_n=s.min_n, min_clusters=s.min_groups)
    if table.empty:
        return []
    return put(min_k_display(table, "groups"), "event_min_k", CAPTION + " Event groups are "
               "resampled." + rule + source, raw=table)


def _variant_tables(run_dir: Path, config, put, rule: str, source: str) -> list[Path]:
    """Each model asked in a prompt variant against the same model asked the track's own
    prompt, on the markets both were asked (:mod:`finbench.reports.variants`)."""
    from finbench.reports.variants import sample_spread, variant_pairs, variant_table

    pairs = variant_pairs(config)
    if not pairs:
        return []
    names = sorted({x for p in pairs for x in p})
    rows = pd.read_parquet(run_dir / "rows.parquet", columns=[
        "task_id", "model", "valid", "scored", "brier", "event_group", "tokens", "dollars"],
        filters=[("model", "in", names)])
    s = config.scores
    sampled = [m.name for m in config.models if getattr(m, "prompt", None) is not None
               and m.prompt.samples > 1]
    table = variant_table(rows, config, pd.factorize(rows["event_group"], sort=True)[0],
                          replicates=s.bootstrap_replicates, seed=s.seed, level=s.level,
                          min_n=s.min_n, min_clusters=s.min_groups,
                          spread=sample_spread(run_dir, sampled))
    shown = pd.DataFrame([{
        "model": r["model"], "variant": r["variant"], "against": r["base"],
        "asked": r["asked"], "valid / against": f"{r['valid']} / {r['valid_base']}",
        "n": r["n"], "groups": r["clusters"],
        "Brier / against": f"{_f(r['brier'])} / {_f(r['brier_base'])}",
        "difference [95% CI, event groups]": _ci(r["diff"], r["diff_lo"], r["diff_hi"]),
        "p (Holm)": f"{fmt_p(r['p_value'])} ({fmt_p(r['p_holm'])})", "MDE 80%": _f(r["mde"]),
        "sample spread of p": _f(r["spread"]) if r["model"] in sampled else "n/a",
        "tokens / forecast": f"{_f(r['tokens'], 0)} / {_f(r['tokens_base'], 0)}",
        "note": r["flag"]} for r in table.to_dict("records")])
    return put(shown, "event_prompt_variants", "Prompt variants: each model asked in a "
               "variant (its user template, reasoning first, repeated samples) against the "
               "same model asked the track's own prompt, on the markets both were asked: "
               "valid answers of each, mean Brier of each on the n markets both scored and "
               "the variant's less the other's (negative: the variant scored better), "
               "resampling whole event groups (two-sided bootstrap p); a sampled variant's "
               "mean standard deviation of p across its samples; tokens per forecast."
               + INFERENCE_NOTE + rule + source, raw=table)


def event_report(run_dir: Path) -> tuple[list[Path], F.FigureSet]:
    """The event run's tables into ``RUN/tables`` and figures into ``RUN/figures`` (those
    that could not be drawn named in the returned set). Every caption ends with the data's
    source, and says SYNTHETIC for synthetic data."""
    config = load_run_config(run_dir)
    s = config.scores
    data = read_manifest(run_dir)["data"]
    source = (f" Source: SYNTHETIC data ({data.get('description') or 'made up'})."
              if data.get("synthetic") else f" Source: event store {Path(data['store']).name}.")
    rule = (f" Descriptive only: fewer than {s.min_n} markets or {s.min_groups} event groups, "
            "too few for the interval to hold its level.")
    scores = pd.read_parquet(run_dir / "scores.parquet")
    skill = pd.read_parquet(run_dir / "skill.parquet")
    out = run_dir / "tables"
    paths = []
    shown: dict[str, tuple[pd.DataFrame, str]] = {}  # what each table shows, for the page

    def put(frame: pd.DataFrame, name: str, caption: str, raw=None) -> list[Path]:
        shown[name] = (frame, caption)
        return write_table(frame, out, name, caption, raw=raw)

    for kind, name, caption in (
            ("overall", "event_scores", "Every scored market"),
            ("category", "event_scores_by_category", "By category"),
            ("retrieval", "event_scores_by_retrieval",
             "By whether the snapshot held relevant posts before t0 (a retrieved post scoring "
             "at least context.relevant_min_score)"),
            ("event_group", "event_scores_by_group",
             "By event group (groups with at least scores.min_group_cases markets)")):
        part = scores[scores["slice_kind"] == kind]
        paths += put(_scores(part, s), name, caption + ". Brier intervals "
                             "resample whole event groups; YES and NO penalties are totals "
                             "that sum to n x Brier." + rule + source, raw=part)
    for kind, name in (("overall", "event_skill"), ("retrieval", "event_skill_by_retrieval")):
        part = skill[skill["slice_kind"] == kind]
        paths += put(_skill(part, s), name, "Brier skill 1 - model/reference on "
                             "the markets both answered validly (n, in its groups), with both "
                             "raw scores; undefined when the reference scores 0." + rule
                             + source, raw=part)
    exclusions = pd.read_csv(run_dir / "exclusions.csv")
    paths += put(exclusions, "event_exclusions", "Tasks by status: ok are scored; "
                         "the others are excluded by the declared rule (void markets are "
                         "never scored as NO) and asked of no model." + source)
    gap = pd.read_csv(run_dir / "market_gap.csv")
    table = gap.assign(**{c: gap[c].map(_f) for c in gap.columns if c.endswith("_gap")})
    paths += put(table, "event_market_gap", "|p_model - p_market| on the markets "
                         "both answered." + source, raw=gap)
    paths += _paired_table(run_dir, config, put, rule, source)
    paths += _slice_tables(run_dir, config, put, rule, source)
    paths += _agent_tables(run_dir, config, put, rule, source)
    paths += _retrieval_table(run_dir, config, put, rule, source)
    paths += _variant_tables(run_dir, config, put, rule, source)
    paths += _memorisation_table(run_dir, config, put, rule, source)
    paths += _min_k_table(run_dir, config, put, rule, source)
    bins = event_reliability(pd.read_parquet(run_dir / "rows.parquet"))
    table = bins.assign(**{c: bins[c].map(_f) for c in ("lower", "upper", "mean_prob",
                                                         "obs_freq")})
    paths += put(table, "event_reliability", f"Reliability: per model, up to "
                         f"{RELIABILITY_BINS} equal-mass bins of its own p_yes on its n scored "
                         "rows (valid answers; invalid ones are counted in event_scores), "
                         "with each bin's count, YES count, mean forecast and observed "
                         "frequency of YES. No interval: a bin of few markets says little."
                         + source, raw=bins)
    points, corp = event_corp(pd.read_parquet(run_dir / "rows.parquet"), s.seed)
    paths += put(corp.assign(**{c: corp[c].map(_f) for c in ("brier", "mcb", "dsc", "unc")}),
                 "event_corp", "CORP reliability (Dimitriadis, Gneiting and Jordan 2021): "
                 "per model, its p_yes recalibrated by isotonic regression of the outcomes "
                 "on them (no bins) and its Brier score decomposed exactly as MCB - DSC + "
                 "UNC (miscalibration, discrimination, uncertainty: the climatology's Brier "
                 "on the same rows); bands: the diagram's 90% consistency bands (outcomes "
                 "drawn 500 times as if the forecasts were calibrated), for at most 2,000 "
                 "distinct values." + source, raw=corp)
    rows = pd.read_parquet(run_dir / "rows.parquet")
    curves = F.murphy_curves(rows, list(dict.fromkeys(rows["model"])), p="p_yes")
    if len(curves):
        write_atomic(out / "murphy_curves.csv", lambda path: curves.to_csv(
            path, index=False, float_format="%.10g", lineterminator="\n"))
    figures = event_figures(run_dir, bins, synthetic=bool(data.get("synthetic")),
                            corp=(points, corp), murphy=curves)
    write_event_html(run_dir, config, read_manifest(run_dir), shown, figures.paths)
    return paths, figures
