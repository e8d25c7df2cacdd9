"""The layers are checked, not hoped for: every module imports only from its own layer or the
layers below it, and takes no private name (``_x``) from another package."""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "finbench"
# lowest first; a module's layer is that of the longest prefix of its dotted name listed here,
# save the track packages: every ``finbench.tracks.<name>`` but the seam's own modules
LAYERS = [
    ["finbench.core"],
    ["finbench.data"],
    ["finbench.tracks", "finbench.tracks.base", "finbench.tracks.configs",
     "finbench.tracks.commands", "finbench.tracks.tools"],  # the seam
    ["finbench.runlog"],
    ["finbench.forecasters"],
    ["finbench.scoring"],
    ["finbench.reports"],
    ["finbench.audit"],
    [],  # the track packages (TRACK_PACKAGES)
    ["finbench.runner", "finbench.shards", "finbench.live"],
    ["finbench.cluster"],
    ["finbench.cli", "finbench.__main__"],
]
SEAM = ("finbench.tracks", "finbench.tracks.base", "finbench.tracks.configs",
        "finbench.tracks.commands", "finbench.tracks.tools")
TRACK_LAYER = 8
PUBLIC_API = "finbench"  # finbench/__init__.py re-exports from every layer


def track_package(module: str) -> str | None:
    """``finbench.tracks.<name>`` of a module of a track package (None for any other)."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[:2] == ["finbench", "tracks"] and ".".join(parts[:3]) \
            not in SEAM:
        return ".".join(parts[:3])
    return None


def layer_of(module: str) -> int:
    if track_package(module):
        return TRACK_LAYER
    best, found = -1, None
    for level, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), level
    if found is None:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")
    return found


def package_of(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        yield name, is_package, ast.parse(path.read_text(), filename=str(path))


def imports(name: str, is_package: bool, tree: ast.AST):
    """(imported module, names taken from it, line) of every finbench import."""
    here = package_of(name, is_package)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("finbench"):
                    yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                target = ".".join(base + ([target] if target else []))
            if target.startswith("finbench"):
                yield target, [a.name for a in node.names], node.lineno


def violations() -> list[str]:
    return [v for name, is_package, tree in modules() if name != PUBLIC_API
            for v in check(name, is_package, tree)]


def check(name: str, is_package: bool, tree: ast.AST) -> list[str]:
    """The imports of one module that point up, or take a private name from another
    package."""
    found = []
    mine, here = layer_of(name), package_of(name, is_package)
    for target, names, line in imports(name, is_package, tree):
        if target == PUBLIC_API:
            found.append(f"{name}:{line} imports the public API package {target}")
            continue
        theirs = layer_of(target)
        if theirs > mine:
            found.append(f"{name}:{line} imports {target}, a higher layer ({theirs} > {mine})")
        target_package = target if _is_package(target) else target.rpartition(".")[0]
        private = [n for n in [*names, *target.split(".")] if _private(n)]
        if private and target_package != here:
            found.append(f"{name}:{line} takes private {', '.join(private)} from {target}, "
                         "another package")
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_package(module: str) -> bool:
    return (PACKAGE.parent / Path(*module.split(".")) / "__init__.py").is_file()


def test_every_import_points_down_and_takes_nothing_private_from_another_package():
    assert violations() == []


def test_the_check_names_an_upward_and_a_private_import():
    """The rule itself, on a forged module of the report layer: importing the run layer, and
    taking a private name from the data layer's store, are both named; its own layer's and
    lower layers' public names are not."""
    forged = ast.parse(
        "from finbench.runner import run\n"
        "from finbench.data.store import _x\n"
        "from finbench.reports.stats import load_run\n"
        "from finbench.core.version import __version__\n")
    assert check("finbench.reports.forged", False, forged) == [
        "finbench.reports.forged:1 imports finbench.runner, a higher layer (9 > 6)",
        "finbench.reports.forged:2 takes private _x from finbench.data.store, another package"]


def track_leaks() -> list[str]:
    """Imports of a track package from outside the track packages (the registries name them
    as text, never import them), and from one track package of another."""
    found = []
    for name, is_package, tree in modules():
        mine = track_package(name)
        for target, _, line in imports(name, is_package, tree):
            theirs = track_package(target)
            if theirs is None or theirs == mine:
                continue
            found.append(f"{name}:{line} imports {target}"
                         + (", another track's package" if mine else ""))
    return found


def test_nothing_outside_the_tracks_imports_a_track_and_tracks_never_each_other():
    assert track_leaks() == []
    forged = ast.parse("from finbench.tracks.intraday.prompt import PromptSettings\n")
    assert [f"x:{line} imports {t}" for t, _, line in
            imports("finbench.runner.forged", False, forged)] == [
        "x:1 imports finbench.tracks.intraday.prompt"]
    assert track_package("finbench.tracks.events.gate") == "finbench.tracks.events"
    assert track_package("finbench.tracks.base") is None


# the modules of a track that make its scores, report and summary from a run's files: they
# never import its data pass, gate or store (what they show is re-derivable from results)
RESULTS_ONLY = ("scores", "score_rows", "report", "figures", "summary")
DATA_PASS = ("gate", "plan", "track", "retrieval", "store", "markets", "posts", "label_pass",
             "contexts", "history", "labels", "tasks", "render", "inputs")


def test_a_tracks_scores_and_report_read_results_only():
    found = []
    for name, is_package, tree in modules():
        package = track_package(name)
        if package is None or name.rpartition(".")[2] not in RESULTS_ONLY:
            continue
        for target, _, line in imports(name, is_package, tree):
            if track_package(target) == package and target.rpartition(".")[2] in DATA_PASS:
                found.append(f"{name}:{line} imports {target}")
    assert found == []


# a test of a track's name, or a config section looked up by getattr/hasattr in place of a
# typed seam (the track's plugin, its config class)
NAME_TEST = re.compile(r"""\.track\s*(==|!=|\bin\b|\bnot\b)|\bformat\s*(==|!=)\s*["']event"""
                       r"""|==\s*["'](intraday|events)["']|["'](intraday|events)["']\s*(==|!=)""")
STAND_IN = re.compile(r"\b(getattr|hasattr)\((self\.)?config\b")
# the one place outside the track packages that writes a track's name: the registry's table
# (and its doctest)
NAMED = {"finbench/tracks/commands.py": ['COMMANDS: dict[str, str] = {"events": '],
         "finbench/tracks/__init__.py": ['"intraday": "finbench.tracks.intraday.plugin",',
                                         '"events": "finbench.tracks.events.plugin",',
                                         'DEFAULT_TRACK = "intraday"', "['events', 'intraday']"]}


def name_tests(root: Path = PACKAGE) -> list[str]:
    """Lines of shared modules (outside the track packages) that test a track's name, name
    one outside :data:`NAMED`, or look a config section up by getattr/hasattr."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        module = rel[:-3].replace("/", ".").removesuffix(".__init__")
        if track_package(module):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            named = re.search(r"""["'](intraday|events)["']""", code) and not any(
                allowed in code for allowed in NAMED.get(rel, []))
            if NAME_TEST.search(code) or STAND_IN.search(code) or named:
                found.append(f"{rel}:{number}: {line.strip()}")
    return found


def test_no_shared_module_tests_a_tracks_name(tmp_path):
    assert name_tests() == []
    forged = tmp_path / "finbench" / "runner"
    forged.mkdir(parents=True)
    (forged / "x.py").write_text('if config.track == "events":\n    pass\n'
                                 'report = getattr(config, "report", None)\n'
                                 'kind = {"intraday": 1}\n')
    assert [f.split(": ", 1)[0] for f in name_tests(tmp_path / "finbench")] == [
        "finbench/runner/x.py:1", "finbench/runner/x.py:3", "finbench/runner/x.py:4"]
