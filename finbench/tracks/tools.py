"""Tools an agent may call while it answers a task (docs/spec.md §12): what every track's tools
share. A track that offers tools gives a :class:`ToolBox` (``Track.tools()``); each call is
answered from the run's data snapshot at the task's own ``now`` (the intraday track: the
forecast instant; the event track: ``t0``) and nothing else, as a :class:`ToolResult` whose
canonical JSON text is what the model reads and whose digest is the call's receipt.

A call asking for anything after ``now`` (a window ending later, a date in the future) is
refused (``refusal = "future"``), never answered with the data clipped to ``now``; arguments
that are no JSON object or break the tool's schema are refused (``"bad_arguments"``), an
unknown tool too (``"unknown_tool"``), an answer of more items than a tool gives at once as
well (``"too_many"``): the model may ask again. Every refusal is receipted like an answer.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Protocol

import numpy as np
import pandas as pd

from finbench.core.errors import LookaheadError

REFUSALS = ("future", "bad_arguments", "unknown_tool", "too_many")


def canonical(value) -> str:
    """The canonical JSON text of ``value``: keys sorted, no spaces, UTF-8 as is (a tool's
    arguments and results are hashed and compared in this form)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False)


@dataclass(frozen=True)
class ItemsText:
    """Items of one shape written as their canonical JSON list already (:func:`items_text`):
    ``text``, and how many (its ``len``)."""

    text: str
    count: int

    def __len__(self) -> int:
        return self.count


def items_text(columns: Mapping[str, list | np.ndarray]) -> ItemsText:
    """The canonical JSON text (:func:`canonical`, byte for byte) of the list of objects
    whose values are ``columns``' (a list or a numpy array each, of one length), written a
    column at a time: floats and ints as ``json`` writes them (``repr``; a NaN or an infinity
    is a ValueError, as there), texts by ``json``'s own escaping, anything else by
    :func:`canonical`; then laid out object by object in one join. For answers of many items
    (a window of bars): sorting each object's keys while encoding it was half of ``json``'s
    time, formatting each object apart a sixth of the rest."""
    keys = sorted(columns)
    count = len(columns[keys[0]]) if keys else 0
    if any(len(columns[k]) != count for k in keys):
        raise ValueError("items_text: columns of different lengths")
    if not count:
        return ItemsText("[]", 0)
    written = _float_texts({k: v for k, v in columns.items() if isinstance(v, np.ndarray)
                            and v.dtype.kind == "f"})
    width = 2 * len(keys)
    pieces: list = [None] * (width * count)  # each object: a key's lead, its value, ...
    for j, k in enumerate(keys):
        lead = ("},{" if j == 0 else ",") + json.dumps(k, ensure_ascii=False) + ":"
        pieces[2 * j::width] = [lead] * count
        pieces[2 * j + 1::width] = written[k] if k in written else _column_text(columns[k])
    pieces[0] = "[{" + pieces[0][3:]  # (the first object: no object before it)
    return ItemsText("".join(pieces) + "}]", count)


def _float_texts(columns: Mapping[str, np.ndarray]) -> dict[str, list[str]]:
    """Each value of numpy float columns as ``json`` writes it (``repr``), each distinct
    value (bit for bit: -0.0 apart from 0.0) written once: a window's prices repeat across
    its bars and columns, and ``repr`` was most of a ``bars`` answer's time."""
    if not columns:
        return {}
    values = np.concatenate([np.asarray(v, np.float64) for v in columns.values()])
    if not np.isfinite(values).all():
        raise ValueError("Out of range float values are not JSON compliant")
    distinct, at = np.unique(values.view(np.int64), return_inverse=True)
    texts = np.array(list(map(float.__repr__, distinct.view(np.float64).tolist())), object)
    every = texts[at.ravel()].tolist()
    out, first = {}, 0
    for k, v in columns.items():
        out[k], first = every[first:first + len(v)], first + len(v)
    return out


def _column_text(values: list | np.ndarray) -> list[str]:
    """Each value as :func:`canonical` writes it."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        return list(map(int.__repr__, values.tolist()))
    if isinstance(values, np.ndarray):  # (any other numpy column: its Python values)
        values = values.tolist()
    kinds = set(map(type, values))
    if kinds == {float}:
        if not np.isfinite(np.asarray(values, dtype=float)).all():
            raise ValueError("Out of range float values are not JSON compliant")
        return list(map(float.__repr__, values))
    if kinds == {int}:
        return list(map(int.__repr__, values))
    if kinds == {str}:
        return list(map(encode_basestring, values))
    return list(map(canonical, values))


def instant_text(ts: pd.Timestamp | None) -> str | None:
    """An instant as tools write it: ISO 8601 in UTC to the second (``...Z``)."""
    if ts is None or pd.isna(ts):
        return None
    return pd.Timestamp(ts).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class ToolResult:
    """One call's answer: ``content``, the canonical JSON text handed to the model; ``items``,
    how many data items it holds; ``max_available``, the latest availability among them
    (None: no item); ``refusal``, one of :data:`REFUSALS` (None: answered); ``ids``, the
    ids of what a search answered (a report counts the answers that cite one)."""

    content: str
    items: int
    max_available: pd.Timestamp | None
    refusal: str | None = None
    ids: tuple[str, ...] = ()  # the ids of the items a search answered (headlines, posts)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content.encode()).hexdigest()


def refused(kind: str, now: pd.Timestamp, message: str) -> ToolResult:
    """A refusal of ``kind`` (:data:`REFUSALS`) with what the model should know."""
    if kind not in REFUSALS:
        raise ValueError(f"{kind!r} is not a refusal ({', '.join(REFUSALS)})")
    return ToolResult(canonical({"refused": kind, "message": message,
                                 "now": instant_text(now)}), 0, None, kind)


def answered(tool: str, now: pd.Timestamp, items: list[dict] | ItemsText, available_ns, *,
             ids: tuple[str, ...] = (), **extra) -> ToolResult:
    """An answer of ``items`` (each a JSON object), ``available_ns`` the availability of each
    (UTC int64 nanoseconds, in the items' order; none for items known in advance, like a
    calendar's). An item available after ``now`` is a LookaheadError: the gate is broken,
    whatever answered. ``ids``: the items' ids, for a search."""
    times = np.asarray(available_ns, dtype=np.int64)
    latest = pd.Timestamp(int(times.max()), tz="UTC") if len(times) else None
    if latest is not None and latest > now:
        raise LookaheadError(f"tool {tool}: an item available at {latest} is answered at "
                             f"now = {now}")
    body = {"tool": tool, "now": instant_text(now), **extra, "items": items}
    if isinstance(items, ItemsText):  # written already: the object's members written as
        # canonical writes them (keys sorted, no spaces), the items' text as it is
        content = "{" + ",".join(
            f"{canonical(key)}:{items.text if key == 'items' else canonical(value)}"
            for key, value in sorted(body.items())) + "}"
    else:
        content = canonical(body)
    return ToolResult(content, len(items), latest, None, tuple(ids))


CLOCK_TABLES_FROM = 64  # instants written by the tables from this many (numpy below)
NAT = np.iinfo(np.int64).min  # numpy's NaT among int64 nanoseconds


def instants_text(ns: np.ndarray) -> list[str]:
    """UTC nanoseconds as tools write instants (:func:`instant_text`), a column at once;
    many instants (a window of bars) by the dates of their days as numpy writes them and the
    clock from tables of minutes and seconds (numpy writing each instant was a tenth of a
    ``bars`` answer)."""
    ns = np.asarray(ns, dtype=np.int64)
    if len(ns) < CLOCK_TABLES_FROM or (ns == NAT).any():
        text = np.datetime_as_string(ns.astype("datetime64[ns]"), unit="s")
        return [f"{t}Z" for t in text.tolist()]
    days, clock = np.divmod(ns // 1_000_000_000, 86_400)
    first, last = int(days.min()), int(days.max())
    if last - first < len(ns):  # the dates of the span, numpy's unique sort left out
        dates = np.datetime_as_string(np.arange(first, last + 1).astype("datetime64[D]"))
        day = days - first
    else:
        distinct, day = np.unique(days, return_inverse=True)
        dates = np.datetime_as_string(distinct.astype("datetime64[D]"))
    dates = dates.tolist()
    minutes, second = np.divmod(clock, 60)
    hhmm, ss = _clock_texts()
    return [f"{dates[d]}T{hhmm[m]}{ss[s]}Z" for d, m, s in zip(
        day.tolist(), minutes.tolist(), second.tolist(), strict=True)]


@functools.cache
def _clock_texts() -> tuple[list[str], list[str]]:
    """``HH:MM`` of each minute of a day and ``:SS`` of each second of a minute."""
    return ([f"{m // 60:02d}:{m % 60:02d}" for m in range(1440)],
            [f":{s:02d}" for s in range(60)])


class ToolBox(Protocol):
    """A track's tools over one data snapshot."""

    names: tuple[str, ...]  # the tools a model config may name
    snapshot_sha256: str  # the snapshot answering them (part of every completion's cache key)

    def schemas(self, names: list[str]) -> list[dict]:
        """The chat-completions ``tools`` of these tools (function name, description and
        strict JSON schema of its arguments)."""

    def now(self, task: Mapping) -> pd.Timestamp:
        """The instant a task is asked at: what its tools may see is available by then."""

    def call(self, name: str, arguments: str, now: pd.Timestamp,
             task: Mapping | None = None) -> ToolResult:
        """The answer to a call of tool ``name`` with ``arguments`` (the JSON text the model
        sent) at ``now`` (:meth:`now` of ``task``), for ``task`` (a tool about the task's own
        subject reads it: the event track's price history of its market): a function of
        these and the snapshot alone."""


class SchemaTools:
    """What a track's ToolBox shares: its tools named by :attr:`SCHEMAS` (name: the
    chat-completions function tool, :func:`function_tool`), a call checked against the
    tool's schema and answered by the method ``_<name>(now, task, **arguments)``; an unknown
    name or arguments that break the schema refused."""

    SCHEMAS: dict[str, dict] = {}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.SCHEMAS)

    def schemas(self, names: list[str]) -> list[dict]:
        return [self.SCHEMAS[name] for name in names]

    def call(self, name: str, arguments: str, now: pd.Timestamp,
             task: Mapping | None = None) -> ToolResult:
        if name not in self.SCHEMAS:
            return refused("unknown_tool", now, f"no tool {name!r}: the tools are "
                           f"{', '.join(self.SCHEMAS)}")
        args, problem = arguments_of(arguments, self.SCHEMAS[name]["function"]["parameters"])
        if problem:
            return refused("bad_arguments", now, f"{name}: {problem}")
        return getattr(self, f"_{name}")(now, task, **args)


def call_tool(toolbox: ToolBox, offered: list[str], name: str, arguments: str,
              now: pd.Timestamp, task: Mapping | None = None) -> ToolResult:
    """A call of an agent offered the tools ``offered`` (its config's): one of them answered
    by ``toolbox``, any other refused as unknown (the track may have it: the agent was not
    given it), the same in the run and in the audit's execution again."""
    if name not in offered:
        return refused("unknown_tool", now, f"no tool {name!r}: the tools are "
                       f"{', '.join(offered)}")
    return toolbox.call(name, arguments, now, task)


def agent_input_sha256(prompt_sha256: str, result_sha256s: list[str]) -> str:
    """An agent's input digest: its prompt's and those of the tool results it was given, in
    the order it was given them (no call: the prompt's own digest, as for a model without
    tools)."""
    if not result_sha256s:
        return prompt_sha256
    text = canonical({"prompt": prompt_sha256, "tool_results": list(result_sha256s)})
    return hashlib.sha256(text.encode()).hexdigest()


def arguments_of(text: str, schema: dict) -> tuple[dict | None, str | None]:
    """``text`` read as a tool's arguments under ``schema`` (an object schema of the kinds
    tools use: string, integer, number, string enums, nullable ones; every property listed
    in ``required``, none other allowed; a nullable one left out is null, as a model not held
    to the strict schema may send it): (arguments, None), or (None, what is wrong)."""
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        return None, f"the arguments are no JSON ({exc})"
    if not isinstance(value, dict):
        return None, "the arguments are no JSON object"
    properties = schema["properties"]
    unknown = sorted(set(value) - set(properties))
    if unknown:
        return None, f"unknown argument(s): {', '.join(unknown)} (known: {', '.join(properties)})"
    missing = [k for k in schema.get("required", []) if k not in value]
    absent = [k for k in missing if not _nullable(properties[k])]
    if absent:
        return None, f"missing argument(s): {', '.join(absent)}"
    value = {**dict.fromkeys(missing), **value}  # a nullable one left out: null
    for key, given in value.items():
        problem = _value_problem(given, properties[key])
        if problem:
            return None, f"{key}: {problem}"
    return value, None


def _nullable(spec: dict) -> bool:
    return isinstance(spec["type"], list) and "null" in spec["type"]


_KINDS = {"string": (str,), "integer": (int,), "number": (int, float)}


def _value_problem(value, spec: dict) -> str | None:
    kinds = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    if value is None:
        return None if "null" in kinds else "may not be null"
    kind = next((k for k in kinds if k != "null"), "string")
    if isinstance(value, bool) or not isinstance(value, _KINDS[kind]):
        return f"{value!r} is not a{'n' if kind == 'integer' else ''} {kind}"
    if "enum" in spec and value not in spec["enum"]:
        return f"{value!r} is not one of {', '.join(map(str, spec['enum']))}"
    if "minimum" in spec and value < spec["minimum"]:
        return f"{value} is below {spec['minimum']}"
    if "maximum" in spec and value > spec["maximum"]:
        return f"{value} is above {spec['maximum']}"
    if kind == "string" and not value.strip():
        return "is empty"
    return None


def function_tool(name: str, description: str, properties: dict) -> dict:
    """A chat-completions function tool with a strict schema: every property required (an
    optional one is nullable), none other allowed."""
    return {"type": "function", "function": {
        "name": name, "description": description, "strict": True,
        "parameters": {"type": "object", "properties": properties,
                       "required": list(properties), "additionalProperties": False}}}
