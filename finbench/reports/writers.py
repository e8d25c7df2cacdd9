"""Write a display table as CSV, Markdown and LaTeX (booktabs), each with its caption."""

from __future__ import annotations

import math
import re
from functools import partial
from pathlib import Path

import pandas as pd

from finbench.core.outputs import write_atomic, write_text

LARGE = 1e6  # from here a number is shown in scientific notation, not as its digits


def fmt(value, digits: int = 3) -> str:
    """Fixed decimals (scientific from :data:`LARGE` on: an interval answered as
    [-1e300, 1e300] has a Winkler score of 2e300, not three hundred digits); ``undef`` for a
    missing or undefined number."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "undef"
    if isinstance(value, int | bool) or (hasattr(value, "is_integer") and isinstance(value, int)):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}" if abs(value) < LARGE else f"{value:.{digits}e}"
    return str(value)


def json_number(value: float) -> float | str | None:
    """A float as JSON holds it: NaN as null, an infinity as the text ``"inf"`` or ``"-inf"``
    (JSON has no such numbers; a Winkler score can pass the float range: an interval
    [-1.7e308, 1.7e308] is valid and its width overflows)."""
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def fmt_p(value) -> str:
    """A p-value: three decimals, ``< 0.001`` below that (never a misleading ``0.000``)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "undef"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def with_ci(est, lo, hi, digits: int = 3) -> str:
    if lo is None or (isinstance(lo, float) and math.isnan(lo)):
        return fmt(est, digits)
    return f"{fmt(est, digits)} [{fmt(lo, digits)}, {fmt(hi, digits)}]"


# each character LaTeX gives a meaning replaced by its text, in one pass (replacing one
# character after another escaped the braces of ``\textbackslash{}`` again); so too those its
# default (OT1) fonts typeset as other glyphs (``|`` as an em dash, ``<`` and ``>`` as
# inverted marks), and control characters, which LaTeX refuses, as their Python escape
_LATEX = str.maketrans({"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$",
                        "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\~{}",
                        "^": r"\^{}", "|": r"\textbar{}", "<": r"\textless{}",
                        ">": r"\textgreater{}",
                        **{chr(c): rf"\textbackslash{{}}x{c:02x}"
                           for c in [*range(0x20), 0x7F] if chr(c) not in "\t\n\r"}})
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _latex_line(text: str) -> str:
    # a ``[`` or ``*`` opening a row would be read as an argument of the ``\\`` or rule
    # before it (its length, its star)
    text = text.translate(_LATEX)
    return "{" + text[0] + "}" + text[1:] if text[:1] in ("[", "*") else text


def _latex_escape(text: str) -> str:
    """``text`` as LaTeX typesets it, character for character; its line breaks as the rows
    of a tabular of its own (a blank line inside a cell would end LaTeX's paragraph)."""
    if "\n" not in text and "\r" not in text:
        return _latex_line(text)
    lines = "\\\\".join(_latex_line(line) for line in _LINE_BREAK.split(text))
    return rf"\begin{{tabular}}[t]{{@{{}}l@{{}}}}{lines}\end{{tabular}}"


NO_ROWS = "(no rows)"  # what a table with none shows (one model: nothing to pair)


def to_markdown(frame: pd.DataFrame, caption: str) -> str:
    if frame.empty:
        return f"**{caption}**\n\n{NO_ROWS}\n"
    cols = list(frame.columns)
    lines = [f"**{caption}**", "", "| " + " | ".join(_markdown_cell(str(c)) for c in cols) + " |",
             "|" + "|".join("---" for _ in cols) + "|"]
    for rec in frame.itertuples(index=False):
        lines.append("| " + " | ".join(_markdown_cell(str(v)) for v in rec) + " |")
    return "\n".join(lines) + "\n"


def _markdown_cell(text: str) -> str:
    """A cell's text inside a Markdown table row: a pipe escaped (else it starts another
    cell), a backslash too (else one before a pipe escapes the escape), and a line break
    written ``<br>`` (else it ends the row); a market's category or event group, from the
    data, may hold any of them."""
    if not _MARKDOWN_SPECIAL.search(text):  # (most cells: numbers and names)
        return text
    text = text.replace("\\", "\\\\").replace("|", r"\|")
    return _LINE_BREAK.sub("<br>", text)


_MARKDOWN_SPECIAL = re.compile(r"[|\\\r\n]")


def to_latex(frame: pd.DataFrame, caption: str, label: str) -> str:
    if frame.empty:  # a tabular needs a column: one cell saying so
        frame = pd.DataFrame({"": [NO_ROWS]})
    cols = list(frame.columns)
    spec = "l" * min(2, len(cols)) + "r" * max(0, len(cols) - 2)
    # needs \usepackage{booktabs,graphicx}; wide tables shrink to the text width
    lines = [r"\begin{table}[t]", r"\centering", r"\small",
             r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%",
             rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
             " & ".join(_latex_escape(str(c)) for c in cols) + r" \\", r"\midrule"]
    for rec in frame.itertuples(index=False):
        lines.append(" & ".join(_latex_escape(str(v)) for v in rec) + r" \\")
    caption = _latex_line(_LINE_BREAK.sub(" ", caption))  # (a caption is one paragraph)
    lines += [r"\bottomrule", r"\end{tabular}}", rf"\caption{{{caption}}}",
              rf"\label{{tab:{label}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def write_table(frame: pd.DataFrame, folder: Path, name: str, caption: str,
                raw: pd.DataFrame | None = None) -> list[Path]:
    """``name.csv`` (full precision of ``raw`` when given), ``name.md`` and ``name.tex``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.csv", folder / f"{name}.md", folder / f"{name}.tex"]
    write_atomic(paths[0], partial((raw if raw is not None else frame).to_csv, index=False,
                                   float_format="%.10g", lineterminator="\n"))
    write_text(paths[1], to_markdown(frame, caption))
    write_text(paths[2], to_latex(frame, caption, name.replace("_", "-")))
    return paths
