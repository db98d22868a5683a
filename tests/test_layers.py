"""The map of docs/design.md ("Layers") against the code: every module of the package stands on it,
and no module imports one on a row above its own (imports inside functions too, read with `ast`);
a face imports below the front door only what the map's "faces may also import" line names."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "memvault"
DESIGN = REPO / "docs" / "design.md"


def layer_map() -> tuple[list[tuple[str, str, set[str]]], set[str]]:
    """The rows of the map, top to bottom: (layer, folder, module paths); and the modules below the
    front door that a face may import."""
    text = DESIGN.read_text()
    section = text[text.index("## 2. Layers"):text.index("## 3.")]
    block = section.split("```")[1]
    rows: list[tuple[str, str, set[str]]] = []
    layer = ""
    for line in block.splitlines():
        found = re.match(r"\s*([a-z ]+?)?\s{2,}(memvault/[a-z_/]*)\s", line)
        if found:
            layer = (found[1] or "").strip() or layer
            rows.append((layer, found[2], set()))
            rest = line[found.end():]
        elif rows:
            rest = line
        else:
            continue
        folder = rows[-1][1]
        rows[-1][2].update(folder + name for name in re.findall(r"(?<![\w/])([a-z_]+\.py)\b", rest))
    allowed = re.search(r"faces may also import:(.*)", section)
    return rows, set(allowed[1].split()) if allowed else set()


def modules() -> list[str]:
    return sorted(str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def resolve(dotted: str) -> str | None:
    """memvault.store.files -> memvault/store/files.py (a package: its __init__.py)."""
    path = REPO / dotted.replace(".", "/")
    if path.with_suffix(".py").exists():
        return str(path.with_suffix(".py").relative_to(REPO))
    if (path / "__init__.py").exists():
        return str((path / "__init__.py").relative_to(REPO))
    return None


def imports_of(module: str) -> set[str]:
    """Every module of the package that `module` imports, at its top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse((REPO / module).read_text())):
        if isinstance(node, ast.Import):
            found.update(filter(None, (resolve(a.name) for a in node.names if a.name.startswith("memvault"))))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memvault") \
                and not node.level:
            for alias in node.names:  # `from memvault.store import files`: the module, else the package
                found.add(resolve(f"{node.module}.{alias.name}") or resolve(node.module))
    found.discard(None)
    found.discard(module)
    return found


def row_of(rows, module: str) -> int:
    path = Path(module)
    for number, (_, folder, names) in enumerate(rows):
        if module in names:
            return number
    if path.name == "__init__.py" and path.parent != PACKAGE.relative_to(REPO):
        # a subpackage's __init__.py (its docstring) stands on the first row of its folder
        return next(n for n, (_, folder, _) in enumerate(rows) if folder == f"{path.parent}/")
    raise AssertionError(f"{module} is not on docs/design.md's map")


def test_every_module_is_on_the_map():
    rows, _ = layer_map()
    mapped = set().union(*(names for _, _, names in rows))
    assert [layer for layer, _, _ in rows][:3] == ["entry", "faces", "front door"] and rows[-1][0] == "base"
    missing = [m for m in modules() if m not in mapped and not (m.endswith("/__init__.py") and m != "memvault/__init__.py")]
    assert missing == [], f"modules missing from docs/design.md's map: {missing}"
    gone = sorted(m for m in mapped if not (REPO / m).exists())
    assert gone == [], f"docs/design.md's map names modules that are not there: {gone}"


def test_no_module_imports_one_on_a_row_above_it():
    rows, _ = layer_map()
    upward = []
    for module in modules():
        mine = row_of(rows, module)
        for imported in sorted(imports_of(module)):
            if row_of(rows, imported) < mine:
                upward.append(f"{module} ({rows[mine][0]}) imports {imported} ({rows[row_of(rows, imported)][0]})")
    assert upward == []


def test_faces_import_below_the_front_door_only_what_the_map_allows():
    rows, allowed = layer_map()
    assert allowed, "docs/design.md's map lost its 'faces may also import' line"
    open_to_faces = {number for number, (layer, _, _) in enumerate(rows) if layer in ("faces", "front door", "base")}
    reached = []
    for module in modules():
        if rows[row_of(rows, module)][0] != "faces":
            continue
        for imported in sorted(imports_of(module)):
            if row_of(rows, imported) not in open_to_faces and imported not in allowed:
                reached.append(f"{module} imports {imported}")
    assert reached == []


def test_the_checks_see_an_import_inside_a_function():
    """The front door imports most of the package inside its methods (fast start): those count."""
    reached = imports_of("memvault/api.py")
    assert {"memvault/reading/retrieval.py", "memvault/learning/learn.py", "memvault/store/reindex.py"} <= reached
