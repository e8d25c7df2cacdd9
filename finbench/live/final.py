"""The season's run of a live directory (``run/``, docs/live.md): the config's sessions up to
the last one whose answers are all revealed, each forecasting model's answers replayed from
what its seals revealed on time (``sealed/``: a late or missed horizon's tasks are not asked,
so never scored as on time), its baselines computed again from the store (a baseline's answer
is its task's and the store's alone: ``finbench verify`` checks it equals the sealed one).
Made again from the ledger at every ``finbench live``; ``score``, ``audit`` and ``report``
read it as any run."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd

from finbench.core.config import ConfigText
from finbench.core.location import is_uri
from finbench.live.ledger import Ledger
from finbench.runner.run import run
from finbench.tracks import plugin_of
from finbench.tracks.configs import load_config_file

RUN, CONFIG, SEALED = "run", "run.toml", "sealed"


def complete_sessions(entries: list[dict]) -> list[str]:
    """The sessions whose every commitment is revealed (or that hold none: missed)."""
    sessions = sorted({e["session"] for e in entries if e["kind"] in ("commit", "missed")})
    open_ = {e["session"] for e in entries if e["kind"] == "commit"} - _revealed_sessions(entries)
    return [s for s in sessions if s not in open_]


def _revealed_sessions(entries: list[dict]) -> set[str]:
    revealed = {(e["task_id"], e["model"]) for e in entries if e["kind"] == "reveal"}
    by_session: dict[str, bool] = {}
    for e in entries:
        if e["kind"] == "commit":
            by_session[e["session"]] = by_session.get(e["session"], True) and (
                (e["task_id"], e["model"]) in revealed)
    return {s for s, done in by_session.items() if done}


def on_time_answers(entries: list[dict]) -> dict[str, pd.DataFrame]:
    """Per model, the answers its on-time seals revealed: ``task_id, p_up, lower, upper,
    rationale`` (an invalid answer with no probability: blank, replayed as invalid)."""
    on_time = {(e["session"], e["horizon"]) for e in entries
               if e["kind"] == "seal" and e["on_time"]}
    rows: dict[str, list] = {}
    for e in entries:
        if e["kind"] == "reveal" and (e["session"], e["horizon"]) in on_time:
            answer = e["payload"]["answer"]
            valid = bool(answer.get("valid"))
            rows.setdefault(e["model"], []).append({
                "task_id": e["task_id"], "p_up": answer["p_up"] if valid else None,
                "lower": answer["lower"] if valid else None,
                "upper": answer["upper"] if valid else None,
                "rationale": answer.get("rationale")})
    return {m: pd.DataFrame(r) for m, r in rows.items()}


def _plain(value):
    """A config's dump as TOML holds it: no None anywhere."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_plain(v) for v in value if v is not None]
    return value


def build_final_run(out: Path, config_path, echo) -> Path | None:
    """Write ``sealed/``, ``run.toml`` and the run ``run/`` of the complete sessions (made
    anew); None while no session is complete."""
    import tomli_w

    entries = Ledger(out).entries()
    sessions = complete_sessions(entries)
    if not sessions:
        return None
    config, _, _ = load_config_file(config_path)
    track = plugin_of(config).open(config)
    baselines = set(track.baseline_kinds)
    answers = on_time_answers(entries)
    sealed = out / SEALED
    shutil.rmtree(sealed, ignore_errors=True)
    sealed.mkdir()
    dumped = json.loads(config.model_dump_json())
    models = []
    for i, (m, raw) in enumerate(zip(config.models, dumped["models"], strict=True)):
        if m.kind in baselines:
            models.append(raw)
            continue
        frame = answers.get(m.name)
        if frame is None:  # nothing sealed on time: no row to score
            echo(f"{m.name}: no answer sealed on time yet; left out of the season's run")
            continue
        if "lower" in frame and frame["lower"].isna().all():
            frame = frame.drop(columns=["lower", "upper"])  # a probability-only forecaster
        path = sealed / f"model-{i:02d}.csv"
        frame.to_csv(path, index=False, lineterminator="\n")
        models.append({"name": m.name, "kind": "replay", "path": f"{SEALED}/{path.name}",
                       "missing": "not_asked", "horizons": m.horizons,
                       "knowledge_cutoff": getattr(m, "knowledge_cutoff", None)})
    dumped["models"] = models
    dumped.pop("live", None)
    dumped["tasks"]["end"] = sessions[-1]
    store = config.data.store
    if not is_uri(store):  # relative to the live directory: it verifies wherever it is copied
        dumped["data"]["store"] = os.path.relpath(Path(store).resolve(), out)
    text = ("# The season's run of this live directory: its sessions up to the last one all\n"
            "# revealed, each forecasting model's on-time sealed answers replayed (sealed/),\n"
            "# its baselines computed again. Written by `finbench live`; do not edit.\n"
            + tomli_w.dumps(_plain(dumped)))
    (out / CONFIG).write_text(text)
    shutil.rmtree(out / RUN, ignore_errors=True)
    run(ConfigText(str((out / CONFIG).resolve()), text), out / RUN, echo=lambda *_: None)
    echo(f"{out / RUN}: the season's run of {len(sessions)} sessions (to {sessions[-1]})")
    return out / RUN
