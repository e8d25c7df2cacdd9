"""The layers are checked, not hoped for: every module imports only from its own layer or the
layers below it, and takes no private name (``_x``) from another package."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "finbench"
# lowest first; a module's layer is that of the longest prefix of its dotted name listed here
LAYERS = [
    ["finbench.core"],
    ["finbench.data"],
    ["finbench.tracks"],
    ["finbench.forecasters"],
    ["finbench.runlog"],
    ["finbench.scoring"],
    ["finbench.reports"],
    ["finbench.runner", "finbench.audit", "finbench.shards"],
    ["finbench.cluster"],
    ["finbench.cli", "finbench.__main__"],
]
PUBLIC_API = "finbench"  # finbench/__init__.py re-exports from every layer


def layer_of(module: str) -> int:
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
        "finbench.reports.forged:1 imports finbench.runner, a higher layer (7 > 6)",
        "finbench.reports.forged:2 takes private _x from finbench.data.store, another package"]


# what knows the intraday track: the track itself, its baselines, the audit that re-derives
# its receipts and the CLI's data commands. The runner, the journal, scoring and reports see
# tracks through finbench.tracks.base only, so a second track plugs in without touching them.
TRACK_AWARE = ("finbench.tracks", "finbench.forecasters.baselines", "finbench.audit",
               "finbench.cli")


def track_leaks() -> list[str]:
    found = []
    for name, is_package, tree in modules():
        if name.startswith(TRACK_AWARE):
            continue
        for target, _, line in imports(name, is_package, tree):
            if target.startswith("finbench.tracks.") and target != "finbench.tracks.base":
                found.append(f"{name}:{line} imports {target}")
    return found


def test_only_the_track_aware_modules_import_a_track():
    assert track_leaks() == []
    forged = ast.parse("from finbench.tracks.intraday.prompt import PromptSettings\n")
    assert [f"x:{line} imports {t}" for t, _, line in
            imports("finbench.runner.forged", False, forged)] == [
        "x:1 imports finbench.tracks.intraday.prompt"]
