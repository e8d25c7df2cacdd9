"""Paired comparisons on the markets two models both scored: every two models of the run
(``event_paired_brier``), and what a part of the question adds: tools (an agent against the
same model without them) and retrieved posts (a model reading them against the same model
asked without them). Each: mean Brier of each, the difference with its CI resampling whole
event groups, two-sided p, the MDE and Holm's p over the table's rows."""

from __future__ import annotations

from itertools import combinations

import pandas as pd

from finbench.reports.agents import agents_of, twin_of
from finbench.reports.stats import descriptive
from finbench.scoring.bootstrap import paired_difference
from finbench.scoring.inference import holm, mde

COLUMNS = ["n", "groups", "brier", "brier_twin", "diff", "diff_lo", "diff_hi", "p_value", "mde",
           "flag"]
# what else must be equal for two language models to ask the same question the same way
SAME_ASKING = ("kind", "model", "base_url", "base_url_env", "prompt", "show_market_price",
               "tools")


def paired_effects(rows: pd.DataFrame, config, pairs: list[tuple[str, str]],
                   twin_column: str) -> pd.DataFrame:
    """Per ``(model, twin)`` of ``pairs`` that both have rows, on the markets both scored: mean Brier of each,
    the model's less the twin's with its CI (whole event groups resampled) and two-sided p,
    the MDE, the "descriptive only" flag; ``p_holm`` over the table's rows."""
    s = config.scores
    scored = rows[rows["scored"].to_numpy(bool)]
    present = set(rows["model"])  # a model skipped (no key) has no rows: nothing to pair
    out = []
    for name, twin in [(a, b) for a, b in pairs if a in present and b in present]:
        both = scored[scored["model"] == name].merge(
            scored[scored["model"] == twin][["task_id", "brier"]], on="task_id",
            suffixes=("", "_twin"))
        groups = pd.factorize(both["event_group"], sort=True)[0]
        mine, theirs = both["brier"].to_numpy(float), both["brier_twin"].to_numpy(float)
        ci, p = paired_difference(mine, theirs, groups, replicates=s.bootstrap_replicates,
                                  seed=s.seed, level=s.level)
        out.append({"model": name, twin_column: twin, "n": ci.n, "groups": ci.clusters,
                    "brier": mine.mean() if len(both) else float("nan"),
                    "brier_twin": theirs.mean() if len(both) else float("nan"),
                    "diff": ci.estimate, "diff_lo": ci.lower, "diff_hi": ci.upper,
                    "p_value": p, "mde": mde(mine - theirs, groups),
                    "flag": descriptive(ci.n, ci.clusters, min_n=s.min_n,
                                        min_clusters=s.min_groups)})
    table = pd.DataFrame(out, columns=["model", twin_column, *COLUMNS])
    return table.assign(p_holm=holm(table["p_value"].to_numpy(float)))


def tools_effect(rows: pd.DataFrame, config) -> pd.DataFrame:
    """What tools add: each agent against the same provider's same model without tools
    (:func:`~finbench.reports.agents.twin_of`)."""
    pairs = [(agent, twin) for agent in agents_of(config)
             if (twin := twin_of(config, agent)) is not None]
    return paired_effects(rows, config, pairs, "without_tools")


def without_retrieval(config, name: str) -> str | None:
    """The model of the run asking the same provider's same model the same way (prompt
    variant, market price, tools) with no posts retrieved, when ``name`` retrieves (its
    first, in the config's order); None without one."""
    model = next(m for m in config.models if m.name == name)
    if getattr(model, "retrieval", "none") != "bm25" or getattr(model, "model", None) is None:
        return None
    for other in config.models:
        if (other.name != name and getattr(other, "retrieval", None) == "none"
                and all(getattr(other, k, None) == getattr(model, k, None)
                        for k in SAME_ASKING)):
            return other.name
    return None


def retrieval_effect(rows: pd.DataFrame, config) -> pd.DataFrame:
    """What retrieved posts add: each model that reads them against the same model asked
    without them (:func:`without_retrieval`)."""
    pairs = [(m.name, twin) for m in config.models
             if (twin := without_retrieval(config, m.name)) is not None]
    return paired_effects(rows, config, pairs, "without_retrieval")


def paired_brier(rows: pd.DataFrame, config, skipped=()) -> pd.DataFrame:
    """Every two models of the run (in the config's order, those skipped left out), the
    first's Brier less the second's on the markets both scored."""
    names = [m.name for m in config.models if m.name not in skipped]
    return paired_effects(rows, config, list(combinations(names, 2)), "versus")
