"""What a run directory's config may become when it is run again: models added, models never
started removed, the executor changed; anything else (tasks, data, context, scores, an existing
model's parameters) would make the directory hold two different runs, and is refused with the
keys that differ."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import ValidationError

from finbench.core.config import HOW_IT_RUNS
from finbench.tracks.configs import validated


@dataclass
class Revision:
    """How a config differs from the one a run directory was made with."""

    added: list[str] = field(default_factory=list)      # model names, in the new config's order
    removed: list[str] = field(default_factory=list)    # model names, in the old config's order
    differing: list[str] = field(default_factory=list)  # dotted keys that may not change

    @property
    def allowed(self) -> bool:
        """Whether the run may go on under the new config: nothing but its models changed
        (or nothing at all: a comment, the order of keys)."""
        return not self.differing


def revision(old: dict, new) -> Revision:
    """Compare ``old`` (a manifest's ``config``, as dumped by the FinBench that wrote it) with
    ``new``. The old config is read by today's schema first, so a key added since with its
    default is no difference; one it cannot read differs as a whole."""
    try:
        before = validated(old).model_dump(mode="json")
    except ValidationError:
        return Revision(differing=["(the run's config, which this FinBench cannot read)"])
    after = new.model_dump(mode="json")
    for dump in (before, after):  # where it runs changes no result
        for key in HOW_IT_RUNS:
            dump.pop(key, None)
    out = Revision()
    old_models = {m["name"]: m for m in before.pop("models")}
    new_models = {m["name"]: m for m in after.pop("models")}
    out.added = [name for name in new_models if name not in old_models]
    out.removed = [name for name in old_models if name not in new_models]
    out.differing = _differing(before, after, "")
    for name in new_models.keys() & old_models.keys():
        out.differing += _differing(old_models[name], new_models[name], f"models.{name}.")
    out.differing.sort()
    return out


def _differing(a, b, prefix: str) -> list[str]:
    """The dotted keys under which ``a`` and ``b`` differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in sorted(a.keys() | b.keys()):
            found += _differing(a.get(key), b.get(key), f"{prefix}{key}.")
        return found
    return [] if a == b else [prefix.rstrip(".")]
