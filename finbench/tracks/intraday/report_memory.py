"""The intraday report's tables of memory: each model with a knowledge cutoff against its
reference and its anonymized twin on each side of it (``memorisation``), its recall probes
(``recall_probes``) and its skill by Min-K% of its tasks' texts (``min_k``)."""

from __future__ import annotations

import pandas as pd

from finbench.reports.writers import with_ci
from finbench.tracks.intraday.config import knowledge_cutoffs
from finbench.tracks.intraday.report_data import RunData, memorisation_table


def memory_tables(data: RunData, put, tables: dict, ci_note: str, facts: str) -> None:
    """Every table of memory the run calls for (``put``: writes a table and keeps it for the
    page): with knowledge cutoffs, ``memorisation`` and ``recall_probes``; with Min-K%
    scores, ``min_k``."""
    if knowledge_cutoffs(data.config):
        memorisation_tables(data, put, tables, ci_note, facts)
        probe_tables(data, put, tables, ci_note, facts)
    min_k_tables(data, put, tables, ci_note, facts)


def memorisation_tables(data: RunData, put, tables: dict, ci_note: str, facts: str) -> None:
    """Each model with a cutoff against its reference and its anonymized twin, before and
    after the cutoff, and the gap (:func:`memorisation_table`)."""
    memory = memorisation_table(data)
    put(pd.DataFrame([{
        "Model": r["model"], "Against": f"{r['against']} ({r['versus']})",
        "Cutoff": r["cutoff"],
        "Before: N (sessions)": f"{r['n_before']} ({r['sessions_before']})",
        "Before: Brier difference [95% CI]": with_ci(r["before"], r["before_lo"],
                                                     r["before_hi"], 4),
        "After: N (sessions)": f"{r['n_after']} ({r['sessions_after']})",
        "After: Brier difference [95% CI]": with_ci(r["after"], r["after_lo"], r["after_hi"],
                                                    4),
        "Gap after - before [95% CI]": with_ci(r["gap"], r["gap_lo"], r["gap_hi"], 4),
        "Note": r["flag"]} for r in memory.to_dict("records")]), "memorisation",
        "Memorisation: each model that declares a knowledge cutoff, its mean Brier less that "
        "of its skill reference (and of its anonymized twin, the same model asked without "
        "ticker, names or dates) on the tasks both scored, on the sessions up to its cutoff "
        "(the outcome may be in its training data) and after it, and the gap after less "
        "before: a model better than the other before its cutoff but not after (a positive "
        "gap) is what memorised outcomes look like. Each side's sessions are resampled within "
        f"it. {ci_note} {facts}", raw=memory)
    tables["memorisation"] = memory


def probe_tables(data: RunData, put, tables: dict, ci_note: str, facts: str) -> None:
    """The recall probes before and after each probed model's cutoff
    (:func:`~finbench.reports.probes.probe_table`; none without ``probes.parquet``)."""
    from finbench.reports.probes import CAPTION, probe_display, probe_table
    from finbench.runlog.rundir import PROBES as TABLE

    if data.run_dir is None or not (data.run_dir / TABLE).is_file():
        return
    probes = pd.read_parquet(data.run_dir / TABLE, columns=["task_id", "model", "p_up",
                                                            "valid"])
    labels = pd.read_parquet(data.run_dir / "labels.parquet", columns=["task_id", "y",
                                                                        "status"])
    tasks = pd.read_parquet(data.run_dir / "tasks.parquet", columns=["task_id", "session"])
    truth = labels.merge(tasks, on="task_id")
    rep = data.config.report
    table = probe_table(probes, pd.DataFrame({
        "task_id": truth["task_id"],
        "y": truth["y"].astype(float).where(truth["status"] == "ok"),
        "cluster": pd.factorize(truth["session"], sort=True)[0],
        "day": truth["session"].astype(str)}), knowledge_cutoffs(data.config),
        replicates=rep.bootstrap_replicates, seed=rep.seed, level=rep.level, min_n=rep.min_n,
        min_clusters=rep.min_sessions)
    put(probe_display(table, "sessions"), "recall_probes", f"{CAPTION} {ci_note} {facts}",
        raw=table)
    tables["recall_probes"] = table


def min_k_tables(data: RunData, put, tables: dict, ci_note: str, facts: str) -> None:
    """Skill within terciles of Min-K% (:func:`~finbench.reports.min_k.min_k_table`; none
    without ``min_k.parquet``)."""
    from finbench.reports.min_k import CAPTION, min_k_display, min_k_table
    from finbench.runlog.rundir import MIN_K

    if data.run_dir is None or not (data.run_dir / MIN_K).is_file():
        return
    scores = pd.read_parquet(data.run_dir / MIN_K, columns=["task_id", "model", "k", "min_k"])
    rep = data.config.report
    cluster, brier = data.cluster_codes(rep.cluster), data.rows["brier"].to_numpy(float)
    task = data.rows["task_id"].to_numpy(object)
    pairs = []
    for model in dict.fromkeys(scores["model"]):
        ref = data.reference(model)
        if model not in data.models or ref is None or ref == model:
            continue
        ra, rb = data.scored_pairs(model, ref)
        pairs.append(pd.DataFrame({"task_id": task[ra], "model": model, "reference": ref,
                                   "brier": brier[ra], "brier_ref": brier[rb],
                                   "cluster": cluster[ra]}))
    if not pairs:
        return
    table = min_k_table(scores, pd.concat(pairs, ignore_index=True),
                        replicates=rep.bootstrap_replicates, seed=rep.seed, level=rep.level,
                        min_n=rep.min_n, min_clusters=rep.min_sessions)
    put(min_k_display(table, "sessions"), "min_k", f"{CAPTION} {ci_note} {facts}", raw=table)
    tables["min_k"] = table
