"""The shape of the code: the largest modules, the longest functions, and the public surface.

Run from the repo root: `python -m benchmarks.code_shape [--most N] [--tests] [--unused]`. It reads the files git
tracks (tests left out unless asked), so the same command gives a before and an after for a refactoring.

The public surface is the names in each module's `__all__`, by package. A name is "used nowhere else" when no
other tracked Python file, tests included, has it as a word: such a name is a candidate to drop from `__all__`
(or, if the module itself does not use it either, to delete). `--unused` lists them.
"""

from __future__ import annotations

import argparse
import ast
import re
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


def exported(tree: ast.Module) -> list[str]:
    """The names a module lists in `__all__` (a literal list or tuple at its top level)."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def public_surface(paths: list[Path], root: Path) -> dict[str, tuple[int, list[str]]]:
    """By top-level package: how many names `__all__` lists, and those no other tracked file uses."""
    everyone = tracked_python(root, tests=True)  # a name a test uses is used
    words = {p: set(re.findall(r"\w+", p.read_text())) for p in everyone}
    surface: dict[str, tuple[int, list[str]]] = {}
    for path in paths:
        names = exported(ast.parse(path.read_text()))
        if not names:
            continue
        rel = str(path.relative_to(root))
        unused = [f"{rel}:{n}" for n in names if not any(n in w for q, w in words.items() if q != path)]
        package = rel.split("/")[0]
        count, listed = surface.get(package, (0, []))
        surface[package] = (count + len(names), listed + unused)
    return surface


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--most", type=int, default=15)
    parser.add_argument("--tests", action="store_true", help="count tests/ too")
    parser.add_argument("--unused", action="store_true", help="list the public names used nowhere else")
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
    surface = public_surface(paths, root)
    total = sum(count for count, _ in surface.values())
    unused = [name for _, listed in surface.values() for name in listed]
    print(f"public names (__all__): {total}, used nowhere else: {len(unused)}")
    for package, (count, listed) in sorted(surface.items(), key=lambda kv: -kv[1][0]):
        print(f"  {count:5d}  {package} ({len(listed)} used nowhere else)")
    if args.unused:
        print("used nowhere else:")
        for name in unused:
            print(f"  {name}")


if __name__ == "__main__":
    main()
