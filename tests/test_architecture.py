"""The shape docs/ARCHITECTURE.md draws: one `mmrag` namespace, and layers that import downwards.

The checkout's own folders are importable from inside it (pytest runs there), so a stray
`import service` would work in the tests and break for every user: these tests read the
imports of every module instead of trusting that they run.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.helpers import REPO

PARTS = ("runtime", "indexes", "retrieval", "generation", "core", "service", "evaluation")
# What each part may import. `service` reaches `evaluation` only to register the eval commands
# in the CLI; nothing imports `service`.
ALLOWED = {
    "runtime": set(),
    "indexes": {"runtime"},
    "generation": {"runtime"},
    "retrieval": {"runtime", "indexes"},
    "core": {"runtime", "indexes", "retrieval", "generation"},
    "evaluation": {"runtime", "indexes", "retrieval", "generation", "core"},
    "service": {"runtime", "indexes", "retrieval", "generation", "core", "evaluation"},
}
EVALUATION_FROM_SERVICE = {"service/cli.py", "service/commands/retrieval.py"}


def modules(*folders: str) -> list[Path]:
    return sorted(path for folder in folders for path in (REPO / folder).rglob("*.py"))


def imported(path: Path) -> list[str]:
    """Every module name imported anywhere in the file, function-level imports included."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_nothing_imports_a_part_outside_the_mmrag_namespace():
    stray = [
        f"{path.relative_to(REPO)}: {name}"
        for path in modules(*PARTS, "tests", "bench", "data")
        for name in imported(path)
        if name.split(".")[0] in PARTS
    ]
    assert not stray


def test_parts_import_only_the_layers_below_them():
    edges = {part: set() for part in PARTS}
    wrong = []
    for part in PARTS:
        for path in modules(part):
            where = path.relative_to(REPO).as_posix()
            for name in imported(path):
                bits = name.split(".")
                if bits[0] != "mmrag" or len(bits) < 2 or bits[1] == part:
                    continue
                edges[part].add(bits[1])
                if bits[1] not in ALLOWED[part]:
                    wrong.append(f"{where} imports {name}")
                if (part, bits[1]) == ("service", "evaluation") and where not in (
                    EVALUATION_FROM_SERVICE
                ):
                    wrong.append(f"{where} imports {name} (only the CLI may)")
    assert not wrong
    # And the allowed edges themselves form no cycle.
    order = ["runtime", "indexes", "generation", "retrieval", "core", "evaluation", "service"]
    for part, targets in edges.items():
        assert all(order.index(target) < order.index(part) for target in targets), part


def test_every_package_folder_is_installed_under_mmrag():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {
        "mmrag." + init.parent.relative_to(REPO).as_posix().replace("/", ".")
        for part in PARTS
        for init in (REPO / part).rglob("__init__.py")
    }
    assert set(config["packages"]) == folders
    assert config["package-dir"] == {f"mmrag.{part}": part for part in PARTS}


def test_only_mmrag_is_importable_outside_the_checkout(tmp_path: Path):
    probe = (
        "import importlib.util, sys\n"
        f"found = [n for n in {PARTS!r} if importlib.util.find_spec(n) is not None]\n"
        "import mmrag.service.app, mmrag.core.pipeline\n"
        "print(found)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("part", PARTS)
def test_each_part_is_a_documented_folder(part: str):
    assert (REPO / part / "__init__.py").is_file()
    assert f"`{part}/`" in (REPO / "docs" / "ARCHITECTURE.md").read_text()


TIME_CALLS = {"time", "perf_counter", "monotonic"}
TIME_NAMES = re.compile(r"(elapsed|seconds|latency|duration|per_s|_s|_ms)$")


def reads_a_time(node: ast.AST) -> bool:
    """A clock read, or a name, attribute or key that holds seconds (`elapsed`, `"generate_s"`)."""
    for part in ast.walk(node):
        if isinstance(part, ast.Attribute) and part.attr in TIME_CALLS:
            return True  # time.perf_counter(), time.monotonic(), time.time()
        if isinstance(part, ast.Name) and TIME_NAMES.search(part.id):
            return True
        if isinstance(part, ast.Attribute) and TIME_NAMES.search(part.attr):
            return True
        text = part.value if isinstance(part, ast.Constant) else None
        if isinstance(text, str) and TIME_NAMES.search(text):
            return True
    return False


def test_no_test_asserts_a_wall_clock_threshold():
    """A time limit in a test fails on any machine slower than its author's: timings belong in
    bench/ and docs/BENCHMARKS.md. (Comparing with 0, or a clock with a deadline variable, as a
    bounded wait does, is not a threshold.)"""
    found = set()
    for path in modules("tests"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Assert):
                continue
            for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
                operands = [compare.left, *compare.comparators]
                limits = [
                    o
                    for o in operands
                    if isinstance(o, ast.Constant)
                    and isinstance(o.value, int | float)
                    and not isinstance(o.value, bool)
                    and o.value != 0
                ]
                if limits and any(reads_a_time(o) for o in operands if o not in limits):
                    found.add(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not found, sorted(found)
