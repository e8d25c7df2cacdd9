"""Prompt variants (docs/spec.md, "Prompt variants"): what a language model's ``prompt``
table may change in how a track asks it, shared by every track.

- ``user``: a Jinja2 template of the user message, filled from the fields the track's gate
  holds for a task (each track lists its own); a template naming any other field is a config
  error, and so is one the sandbox cannot parse.
- ``reasoning = "think"``: the model reasons in text first and ends its answer with the JSON
  object, read as :func:`last_json_object` finds it.
- ``examples``: earlier resolved tasks shown with their outcomes, drawn by the track from
  what was known before the task's ``now`` (the intraday track: the last ``examples`` labels
  of the task's ticker and horizon known before it).
- ``samples``: the same prompt asked ``samples`` times, answers aggregated by ``aggregate``
  (mean or median probability; the interval's ends by their medians), the spread kept.

Each variant names itself in the prompt's template version (:func:`variant_tag`), so its
prompts' receipts and its cache keys are its own.
"""

from __future__ import annotations

import functools
import hashlib
import json

THINK_SYSTEM = ("Think step by step before you answer: weigh the evidence in a few short "
                "paragraphs of plain text, then end your reply with the JSON object (nothing "
                "after it).")
THINK_LAST_LINE = "Reason first, then end your reply with the JSON object."


@functools.cache
def environment():
    """The sandbox user templates render in: no attribute access beyond plain values,
    every name must be given (StrictUndefined), no HTML escaping (the text is a prompt)."""
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    return ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False,
                                         keep_trailing_newline=False)


def template_names(text: str) -> set[str]:
    """The fields a Jinja2 template names; a ValueError with the template's line when it
    does not parse."""
    from jinja2 import TemplateSyntaxError, meta

    try:
        return set(meta.find_undeclared_variables(environment().parse(text)))
    except TemplateSyntaxError as exc:
        raise ValueError(f"prompt.user: not a Jinja2 template (line {exc.lineno}: "
                         f"{exc.message})") from None


@functools.lru_cache(maxsize=64)
def compiled(text: str):
    """A user template compiled once per process."""
    return environment().from_string(text)


def render_user(text: str, fields: dict[str, object]) -> str:
    """A user template filled from one task's fields."""
    return compiled(text).render(fields)


def check_variant_fields(model_name: str, variant, held: dict[str, str],
                 absent: dict[str, str] | None = None) -> None:
    """A ValueError when a model's prompt variant names in its user template a field the
    gate does not hold for its tasks (``held``: field to what it holds; ``absent``: fields
    this model's config leaves out, with why), or draws examples its template does not show."""
    absent = dict(absent or {})
    if not variant.examples:
        absent.setdefault("examples", "the model is shown no examples (set prompt.examples)")
    if variant.user is None:
        return
    names = template_names(variant.user)
    for name in sorted(names):
        if name in absent:
            raise ValueError(f"models.{model_name}.prompt.user names {name!r}: {absent[name]}")
        if name not in held:
            raise ValueError(
                f"models.{model_name}.prompt.user names {name!r}, which the gate does not "
                f"hold for a task; a template may name: {', '.join(sorted(held))}")
    if variant.examples and "examples" not in names:
        raise ValueError(f"models.{model_name}.prompt: {variant.examples} examples are drawn "
                         "but the user template does not show them (name {{ examples }})")


def variant_tag(variant) -> str:
    """What a prompt variant adds to its template version (empty for the track's own
    prompt): the user template's digest, ``think``, the number of examples."""
    if variant is None:
        return ""
    parts = []
    if variant.user is not None:
        parts.append("user-" + hashlib.sha256(variant.user.encode()).hexdigest()[:12])
    if variant.reasoning == "think":
        parts.append("think")
    if variant.examples:
        parts.append(f"examples-{variant.examples}")
    return "".join("+" + p for p in parts)


def last_json_object(text: str) -> str | None:
    """The JSON object that ends ``text`` (what may follow it: white space and a closing
    code fence), found from the right so that braces in the reasoning before it do not
    matter; None when the text ends with none."""
    decoder = json.JSONDecoder()
    tail = text.rstrip()
    if tail.endswith("```"):
        tail = tail[:-3].rstrip()
    if not tail.endswith("}"):
        return None
    pos = tail.rfind("{")
    while pos >= 0:
        try:
            _, end = decoder.raw_decode(tail, pos)
        except ValueError:
            end = -1
        if end == len(tail):
            return tail[pos:]
        pos = tail.rfind("{", 0, pos)
    return None
