"""`auditor --help` must work without loading the heavy stack."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "vllm", "ragas", "sentence_transformers", "transformers", "faiss", "llama_index")


def test_cli_import_loads_nothing_heavy() -> None:
    """Importing the CLI and the package leaves torch, vllm, ragas, faiss and LlamaIndex unloaded."""
    code = (
        "import sys, auditor, auditor.cli, auditor.config, auditor.ingest, auditor.retrieve; "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _module_imports() -> dict[str, set[str]]:
    """Each auditor module's imports of other auditor modules, at any depth of its code."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "auditor"
    names = {
        ".".join(("auditor", *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
        for p in root.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        module = ".".join(("auditor", *path.relative_to(root).with_suffix("").parts))
        module = module.removesuffix(".__init__")
        edges = graph.setdefault(module, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("auditor"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    edges.add(sub if sub in names else str(node.module))
            elif isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name.startswith("auditor"))
        edges.discard(module)
    return graph


def test_no_import_cycle_between_auditor_modules() -> None:
    """Imports form a tree of layers (results below report and compare, and so on): a cycle,
    even one hidden in a function-local import, is a layering error."""
    graph = _module_imports()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if target not in graph:
                continue
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_auditor_imports_sit_at_module_top() -> None:
    """`from auditor ...` inside a function hides the module's dependencies (and cycles)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "auditor"
    nested = []
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            is_ours = isinstance(node, ast.ImportFrom) and (node.module or "").startswith("auditor")
            if is_ours and id(node) not in top:
                nested.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    assert nested == []


def test_tests_do_not_import_benches() -> None:
    """What a test needs lives in `auditor/`; benches are scripts that may change freely."""
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    found = [
        str(p.relative_to(tests))
        for p in tests.rglob("*.py")
        if any(
            line.lstrip().startswith(("from bench", "import bench"))
            for line in p.read_text(encoding="utf-8").splitlines()
        )
    ]
    assert found == []


def test_the_check_knows_nothing_of_ray() -> None:
    """`auditor.scale` wraps the claim check (its actors call `check_batch`; `check_run` takes
    the runner it opens): no module of `auditor.verify` imports it, at any depth."""
    graph = _module_imports()
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("auditor.verify")
        for target in targets
        if target.startswith("auditor.scale")
    )
    assert upward == []
