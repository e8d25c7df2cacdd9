"""The docs say what is true: the README's quickstart runs exactly as written (but for the
virtual environment, which the test already runs in), its links resolve, and every test the
docs cite as proof exists."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def quickstart() -> tuple[str, str]:
    """The shell and Python blocks of the README's quickstart section."""
    part = README.split("## Quickstart on your own data", 1)[1].split("\n## ", 1)[0]
    shell = re.search(r"```sh\n(.*?)```", part, re.S).group(1)
    python = re.search(r"```python\n(.*?)```", part, re.S).group(1)
    return shell, python


def test_the_readme_quickstart_runs_as_written(tmp_path):
    shell, python = quickstart()
    assert shell.startswith("make venv\n")  # the one line this test stands in for
    bin_dir = Path(sys.executable).parent
    script = shell.removeprefix("make venv\n").replace(".venv/bin/", f"{bin_dir}/")
    (tmp_path / "data" / "example").mkdir(parents=True)
    shutil.copy(ROOT / "data" / "example" / "synthetic_bars.csv", tmp_path / "data" / "example")
    (tmp_path / "results").mkdir()
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "audit passed" in done.stdout
    assert (tmp_path / "results" / "my" / "tables").is_dir()
    ran = subprocess.run([sys.executable, "-c", python], cwd=tmp_path, capture_output=True,
                         text=True)
    assert ran.returncode == 0, ran.stderr


def test_every_link_in_the_readme_resolves():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    assert links, "the README links to its docs"
    assert [link for link in links if not (ROOT / link).exists()] == []


def test_every_test_the_docs_cite_exists():
    cited = {m for doc in DOCS for m in re.findall(r"(test_\w+\.py)(?:::(test_\w+))?",
                                                   doc.read_text())}
    assert cited
    missing = []
    for file, name in cited:
        path = ROOT / "tests" / file
        if not path.is_file() or (name and f"def {name}(" not in path.read_text()):
            missing.append(f"{file}::{name}" if name else file)
    assert missing == []
