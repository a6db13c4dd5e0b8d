"""The shape of the code: the largest modules and the longest functions, by lines.

Run from the repo root: `python -m benchmarks.code_shape [--most N] [--tests]`. It reads the files git tracks
(tests left out unless asked), so the same command gives a before and an after for a refactoring.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
from pathlib import Path


def tracked_python(root: Path, *, tests: bool) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "*.py"],  # noqa: S607 - git from PATH, as a developer runs it
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return [root / p for p in out if tests or not p.startswith("tests/")]


def module_lines(paths: list[Path], root: Path) -> list[tuple[int, str]]:
    return sorted(((len(p.read_text().splitlines()), str(p.relative_to(root))) for p in paths), reverse=True)


def function_lines(paths: list[Path], root: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for path in paths:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                assert node.end_lineno is not None  # noqa: S101 - always set by ast.parse
                length = node.end_lineno - node.lineno + 1
                kind = "class" if isinstance(node, ast.ClassDef) else "def"
                found.append((length, f"{path.relative_to(root)}:{node.lineno} {kind} {node.name}"))
    return sorted(found, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--most", type=int, default=15)
    parser.add_argument("--tests", action="store_true", help="count tests/ too")
    args = parser.parse_args()
    root = Path.cwd()
    paths = tracked_python(root, tests=args.tests)
    print(f"largest modules (lines), of {len(paths)} files:")
    for lines, name in module_lines(paths, root)[: args.most]:
        print(f"  {lines:5d}  {name}")
    funcs = [f for f in function_lines(paths, root) if " def " in f[1]]
    classes = [f for f in function_lines(paths, root) if " class " in f[1]]
    print("longest functions (lines):")
    for lines, name in funcs[: args.most]:
        print(f"  {lines:5d}  {name}")
    print("longest classes (lines):")
    for lines, name in classes[:5]:
        print(f"  {lines:5d}  {name}")


if __name__ == "__main__":
    main()
