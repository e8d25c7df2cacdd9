"""The table writers' text: a cell's characters reach LaTeX as themselves."""

import re

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from finbench.reports.writers import to_latex, to_markdown

# LaTeX's text for each character it gives a meaning, read back (a reader of the escapes)
READ = {r"\textbackslash{}": "\\", r"\&": "&", r"\%": "%", r"\$": "$", r"\#": "#", r"\_": "_",
        r"\{": "{", r"\}": "}", r"\~{}": "~", r"\^{}": "^"}
TOKEN = re.compile("|".join(re.escape(k) for k in sorted(READ, key=len, reverse=True))
                   + r"|[\\&%$#_{}~^]|[^\\&%$#_{}~^]+")


def read_back(text: str) -> str:
    """The characters ``text`` typesets; an unescaped special character is an error."""
    out = []
    for m in TOKEN.finditer(text):
        token = m.group()
        if token in READ:
            out.append(READ[token])
        elif len(token) == 1 and token in "\\&%$#_{}~^":
            raise AssertionError(f"unescaped {token!r} in {text!r}")
        else:
            out.append(token)
    assert "".join(m.group() for m in TOKEN.finditer(text)) == text
    return "".join(out)


def cell_line(cell: str) -> str:
    """The LaTeX row of a one-column table holding ``cell``."""
    lines = to_latex(pd.DataFrame({"col": [cell]}), "caption", "t").splitlines()
    return lines[lines.index(r"\midrule") + 1]


def test_a_backslash_is_typeset_as_one():
    # by hand: the backslash, then the underscore, each its own escape
    assert cell_line("a\\b_c") == r"a\textbackslash{}b\_c \\"
    assert cell_line("{x} ~ ^") == r"\{x\} \~{} \^{} \\"
    assert cell_line("100% & $5 #1") == r"100\% \& \$5 \#1 \\"


@given(st.text(alphabet=st.sampled_from(list("ab \\&%$#_{}~^é|")), max_size=30))
def test_every_cell_reads_back_as_written(cell):
    line = cell_line(cell)
    assert line.endswith(r" \\")
    assert read_back(line[:-3]) == cell


def markdown_cells(text: str) -> list[list[str]]:
    """The cells of the Markdown table in ``text`` as a GitHub-flavoured renderer reads them
    (markdown-it-py's table rule): each cell's characters, a ``<br>`` read as a line break."""
    markdown_it = pytest.importorskip("markdown_it")
    tokens = markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").parse(text)
    rows, row = [], None
    for token in tokens:
        if token.type == "tr_open":
            row = []
        elif token.type == "tr_close":
            rows.append(row)
        elif token.type == "inline" and row is not None:
            row.append("".join("\n" if child.type == "html_inline" and child.content == "<br>"
                               else child.content for child in token.children or []))
    return rows


def test_a_markdown_cell_holding_a_pipe_stays_one_cell():
    text = to_markdown(pd.DataFrame({"slice": ["Sports | NBA"], "n": [3]}), "caption")
    # by hand: the pipe escaped, the row still of two cells
    assert "| Sports \\| NBA | 3 |" in text.splitlines()
    assert markdown_cells(text) == [["slice", "n"], ["Sports | NBA", "3"]]


@given(st.lists(st.text(alphabet=st.sampled_from(list("ab |\\\n")), min_size=1, max_size=12)
                .filter(lambda t: t.strip(" ") == t), min_size=1, max_size=3))
def test_every_markdown_cell_reads_back_as_written(cells):
    frame = pd.DataFrame([cells], columns=[f"c{i}" for i in range(len(cells))])
    got = markdown_cells(to_markdown(frame, "caption"))
    assert got == [list(frame.columns), cells]
