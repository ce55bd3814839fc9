"""The layers of ARCHITECTURE.md, checked: every module has a layer, every import points to its
own layer or one below, no two modules import each other (directly or around a circle), and
what a part must never reach it does not reach through any chain of imports.

Every import counts: at the top of a module, inside a function (a deferred import is still an
arrow) and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "skillgrad"

# Top to bottom. A module belongs to the first layer one of whose prefixes it matches; it may
# import its own layer and those below, never one above.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the package face", ("__init__",)),
    ("command line", ("cli",)),
    ("web view", ("dashboard",)),
    ("sleep", ("sleep",)),
    ("entry points and readers", ("api", "evaluate", "plan", "runview", "scaffold",
                                  "serve")),
    ("the loop", ("trainer",)),
    ("assembly from a config", ("build", "export", "tracking")),
    ("the loop's helpers", ("clients", "summary", "settings")),
    ("the loop's state", ("state", "callbacks")),
    ("configuration", ("config",)),
    ("stages and where rollouts run", ("stages", "execution")),
    ("environments and test doubles", ("envs", "testing")),
    ("records", ("records", "registry", "skillopt")),
    ("models", ("models",)),
    ("foundations", ("rundir", "sandbox", "prompts", "parallel", "agentskills", "traces",
                     "redact", "yamlfile", "confine", "seccomp", "namespaces", "console",
                     "package")),
    ("leaves", ("files", "skill", "errors", "version", "words", "dotted")),
)

# What a part must never reach, through any chain of imports.
NEVER: dict[str, tuple[str, ...]] = {
    # The dashboard only reads run directories and sleep nights: it cannot train, call a
    # model or score.
    "dashboard": ("trainer", "build", "clients", "evaluate", "cli", "stages", "execution"),
    # Trackers are callbacks: they observe the loop and never drive it.
    "tracking": ("trainer", "build", "clients", "evaluate", "cli", "stages"),
    # A stage is a pure function of its inputs and the model it is handed: no config, no files.
    "stages": ("config", "registry", "rundir", "state", "settings"),
    # Where rollouts run: it moves environments and model calls, and knows no config or stage.
    "execution": ("stages", "config", "registry", "rundir"),
    # Backends know nothing of a run's records, environments or config.
    "models": ("records", "envs", "config", "registry"),
    "envs": ("stages", "config", "rundir"),
    # The run's readers read files; they never build a model or an environment.
    "runview": ("build", "clients", "trainer", "evaluate"),
    # The Agent Skills format is a file format, shared by export and sleep.
    "agentskills": ("sleep", "export", "models", "rundir"),
}


def _module(path: Path, package: Path) -> str:
    rel = path.relative_to(package).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts) or "__init__"


def _imports(path: Path, known: set[str]) -> list[tuple[int, str]]:
    """(line, skillgrad module) for every import of the package in ``path``; ``from
    skillgrad.x import y`` names the module ``x.y`` when ``y`` is a module."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "skillgrad":
                out += [(node.lineno, a.name if a.name in known else "__init__")
                        for a in node.names]
            elif node.module.startswith("skillgrad."):
                base = node.module.removeprefix("skillgrad.")
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    out.append((node.lineno, sub if sub in known else base))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name.removeprefix("skillgrad.")) for a in node.names
                    if a.name.startswith("skillgrad.")]
    return out


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> int | None:
    for i, (_, prefixes) in enumerate(LAYERS):
        if any(_matches(module, p) for p in prefixes):
            return i
    return None


def graph(package: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """module -> {imported module: line of the first import}."""
    paths = {_module(p, package): p for p in sorted(package.rglob("*.py"))}
    known = set(paths)
    edges: dict[str, dict[str, int]] = {}
    for me, path in paths.items():
        found: dict[str, int] = {}
        for line, target in _imports(path, known):
            if target != me:
                found.setdefault(target, line)
        edges[me] = found
    return edges


def _reach(edges: dict[str, dict[str, int]], start: str) -> dict[str, list[str]]:
    """Every module ``start`` reaches, with one chain of imports that gets there."""
    chains = {start: [start]}
    todo = [start]
    while todo:
        here = todo.pop()
        for target in edges.get(here, {}):
            if target not in chains:
                chains[target] = [*chains[here], target]
                todo.append(target)
    return chains


def violations(package: Path = PACKAGE) -> list[str]:
    edges = graph(package)
    found = []
    for me in sorted(edges):
        mine = layer_of(me)
        if mine is None:
            found.append(f"{me}: in no layer (give it one in LAYERS and ARCHITECTURE.md)")
            continue
        for target, line in sorted(edges[me].items()):
            theirs = layer_of(target)
            if theirs is not None and theirs < mine:
                found.append(f"{me}:{line}: imports {target}, a layer above "
                             f"({LAYERS[mine][0]} -> {LAYERS[theirs][0]})")
        chains = _reach(edges, me)
        for prefix, banned in NEVER.items():
            if not _matches(me, prefix):
                continue
            for hit in banned:  # the shortest chain to each part it must not reach
                reached = [c for t, c in sorted(chains.items()) if _matches(t, hit)]
                if reached:
                    chain = min(reached, key=len)
                    found.append(f"{me}: reaches {hit}: {' -> '.join(chain)}")
    return found + circles(edges)


def circles(edges: dict[str, dict[str, int]]) -> list[str]:
    """Every group of modules that import each other round a circle (Tarjan's strongly
    connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, {}):
            if target not in edges:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return [f"circle: {', '.join(g)}" for g in sorted(groups)]


def test_imports_follow_the_layers() -> None:
    assert violations() == []


def test_the_rules_catch_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a stage that reads the config is reported (a layer above, and a
    part stages never reach), a record is not."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "probe.py").write_text(
        "from skillgrad.config import SkillgradConfig\nfrom skillgrad.records import Task\n",
        encoding="utf-8")
    assert violations(tmp_path) == [
        "stages.probe:1: imports config, a layer above "
        "(stages and where rollouts run -> configuration)",
        "stages.probe: reaches config: stages.probe -> config"]


def test_the_rules_catch_a_deferred_import_and_a_chain(tmp_path: Path) -> None:
    """An import inside a function counts, and a part reached through another module is
    reached: the dashboard reaching the trainer through a reader of runs."""
    (tmp_path / "dashboard").mkdir()
    (tmp_path / "dashboard" / "page.py").write_text(
        "def f():\n    from skillgrad.runview import x\n", encoding="utf-8")
    (tmp_path / "runview.py").write_text(
        "def g():\n    from skillgrad.trainer import Trainer\n", encoding="utf-8")
    (tmp_path / "trainer.py").write_text("", encoding="utf-8")
    assert violations(tmp_path) == [
        "dashboard.page: reaches trainer: dashboard.page -> runview -> trainer",
        "runview: reaches trainer: runview -> trainer"]


def test_the_rules_catch_a_circle(tmp_path: Path) -> None:
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "a.py").write_text("from skillgrad.cli.b import x\n", encoding="utf-8")
    (tmp_path / "cli" / "b.py").write_text("def f():\n    from skillgrad.cli.a import y\n",
                                          encoding="utf-8")
    assert violations(tmp_path) == ["circle: cli.a, cli.b"]


def test_a_module_without_a_layer_is_reported(tmp_path: Path) -> None:
    (tmp_path / "newpart").mkdir()
    (tmp_path / "newpart" / "thing.py").write_text("", encoding="utf-8")
    assert violations(tmp_path) == [
        "newpart.thing: in no layer (give it one in LAYERS and ARCHITECTURE.md)"]


@pytest.mark.parametrize("stage", ["rollout", "reflect", "aggregate", "select", "schedule",
                                   "update", "gate", "slow_update", "meta_skill", "rewrite",
                                   "appendix", "candidate", "hygiene"])
def test_every_stage_has_its_module_and_is_named_in_the_architecture(stage: str) -> None:
    assert (PACKAGE / "stages" / f"{stage}.py").is_file()
    text = (PACKAGE.parents[1] / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert f"stages/{stage}.py" in text


def test_every_layer_is_on_the_map() -> None:
    """ARCHITECTURE.md draws every package and top-level module the layers name."""
    text = (PACKAGE.parents[1] / "ARCHITECTURE.md").read_text(encoding="utf-8")
    missing = [p for _, prefixes in LAYERS for p in prefixes
               if p != "__init__" and p not in text]
    assert missing == []


def test_a_module_over_the_house_limit_says_why() -> None:
    """Modules stay under ~400 lines, or their docstring gives the reason."""
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 410:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "Over the house limit" not in doc:
                long.append(f"{path.relative_to(PACKAGE)}: {text.count(chr(10))} lines")
    assert long == []
