"""The table writers' text: a cell's characters reach LaTeX as themselves."""

import re

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from finbench.reports.writers import to_latex, to_markdown

# LaTeX's text for each character it gives a meaning, read back (a reader of the escapes)
READ = {r"\textbackslash{}": "\\", r"\&": "&", r"\%": "%", r"\$": "$", r"\#": "#", r"\_": "_",
        r"\{": "{", r"\}": "}", r"\~{}": "~", r"\^{}": "^", r"\textbar{}": "|",
        r"\textless{}": "<", r"\textgreater{}": ">"}
SPECIAL = "\\&%$#_{}~^|<>"
TOKEN = re.compile("|".join(re.escape(k) for k in sorted(READ, key=len, reverse=True))
                   + rf"|[{re.escape(SPECIAL)}]|[^{re.escape(SPECIAL)}]+")
NESTED = re.compile(r"\\begin\{tabular\}\[t\]\{@\{\}l@\{\}\}(.*)\\end\{tabular\}", re.S)


def read_line(text: str) -> str:
    """The characters one line of a cell typesets; an unescaped special character, a control
    character, or a ``[`` or ``*`` that the ``\\`` or rule before it would take, is an
    error."""
    assert text[:1] not in ("[", "*"), f"{text!r} opens with an argument of what precedes it"
    assert not re.search(r"[\x00-\x08\x0a-\x1f\x7f]", text), f"control character in {text!r}"
    if text[:3] in ("{[}", "{*}"):
        text = text[1] + text[3:]
    out = []
    for m in TOKEN.finditer(text):
        token = m.group()
        if token in READ:
            out.append(READ[token])
        elif len(token) == 1 and token in SPECIAL:
            raise AssertionError(f"unescaped {token!r} in {text!r}")
        else:
            out.append(token)
    assert "".join(m.group() for m in TOKEN.finditer(text)) == text
    return "".join(out)


def read_back(text: str) -> str:
    """The characters a cell's LaTeX typesets, its lines (the rows of a tabular of its own)
    joined by line breaks."""
    nested = NESTED.fullmatch(text)
    if nested is None:
        return read_line(text)
    return "\n".join(read_line(line) for line in nested.group(1).split("\\\\"))


def as_typeset(cell: str) -> str:
    """What a cell should read back as: each line break one, a control character as its
    Python escape."""
    cell = re.sub(r"\r\n|\r", "\n", cell)
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", cell)


def cell_line(cell: str) -> str:
    """The LaTeX row of a one-column table holding ``cell``."""
    lines = to_latex(pd.DataFrame({"col": [cell]}), "caption", "t").splitlines()
    return lines[lines.index(r"\midrule") + 1]


def test_a_backslash_is_typeset_as_one():
    # by hand: the backslash, then the underscore, each its own escape
    assert cell_line("a\\b_c") == r"a\textbackslash{}b\_c \\"
    assert cell_line("{x} ~ ^") == r"\{x\} \~{} \^{} \\"
    assert cell_line("100% & $5 #1") == r"100\% \& \$5 \#1 \\"


def test_line_breaks_brackets_and_glyphs_of_a_cell_are_typeset_as_written():
    # by hand: a blank line inside a cell ended the paragraph (LaTeX stops on it); a row
    # opening with "[" gave its text to \midrule as a length; OT1 set "|" as an em dash
    assert cell_line("a\n\nb") == r"\begin{tabular}[t]{@{}l@{}}a\\\\b\end{tabular} \\"
    assert cell_line("[x] *y") == r"{[}x] *y \\"
    assert cell_line("a\r\n*b|c<d>") == (r"\begin{tabular}[t]{@{}l@{}}a\\{*}b\textbar{}c"
                                         r"\textless{}d\textgreater{}\end{tabular} \\")
    assert cell_line("bell\x07") == r"bell\textbackslash{}x07 \\"
    text = to_latex(pd.DataFrame({"col": ["x"]}), "|p - q|\nover [all]", "t")
    assert r"\caption{\textbar{}p - q\textbar{} over [all]}" in text.splitlines()


@given(st.text(alphabet=st.sampled_from(list("ab \\&%$#_{}~^é|<>[]*\n\r\x0b\x7f")),
               max_size=30))
def test_every_cell_reads_back_as_written(cell):
    text = to_latex(pd.DataFrame({"col": [cell], "n": [1]}), "caption", "t")
    lines = text.splitlines()
    assert len(lines) == 14 and "" not in lines  # each row one line, no blank line
    line = lines[lines.index(r"\midrule") + 1]
    assert line.endswith(r" & 1 \\")
    assert read_back(line[:-len(r" & 1 \\")]) == as_typeset(cell)


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
