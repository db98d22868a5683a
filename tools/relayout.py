"""The move of issue 28: memvault's flat modules into subpackages by layer, with every import in
the package, tests/, bench/ and tools/ rewritten. Mechanical and re-runnable on a tree that still has
the flat layout (`python3 tools/relayout.py`), so that a branch opened on the old layout can be
brought over the same way (`git mv` keeps the history; git's rename detection follows it).

Layers, top to bottom (docs/design.md, "Layers"): faces, the front door (api.py), moving, changing,
learning, reading, store. A module imports only from its own layer or below."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# old module -> new dotted path under memvault (renamed where the old name misled)
MOVES = {
    **{m: f"faces.{m}" for m in ("cli", "serve", "mcp_server", "completion", "term")},
    **{m: f"store.{m}" for m in ("files", "gitrepo", "lock", "signals", "config", "models", "native_memory",
                                  "index", "state", "turn_context", "vault", "llm", "ingest")},
    "sync": "store.reindex",  # `memvault reindex`: the index in step with the files
    **{m: f"reading.{m}" for m in ("retrieval", "ranking", "llm_rerank", "listing", "history", "browse")},
    **{m: f"learning.{m}" for m in ("learn", "extraction", "statements", "prompts", "episodes", "summaries",
                                     "sessions", "consolidate", "chat")},
    **{m: f"changing.{m}" for m in ("manage", "undo", "review", "scrub")},
    "secret_scan": "store.secret_scan",  # issue 31: what every write of the store withholds
    **{m: f"moving.{m}" for m in ("importing", "import_formats", "jsonstream", "exporting", "merge")},
    "remote": "moving.sync",  # `memvault sync`: with a git remote
}
PACKAGES = {
    "faces": "The faces: the CLI, `memvault serve`, `memvault mcp`, and what only they use (completion, terminal).",
    "store": "The store: memory files, git, the lock, settings, the index and its models, the LLM client, and the\n"
             "two ways memories get in (ingest: verbatim; reindex: the files as they are on disk).",
    "reading": "Reading: search (retrieval, ranking, LLM rerank), listing, history and browsing.",
    "learning": "Learning: facts from the user's words (learn, extraction, statements), episodes, summaries,\n"
                "sessions, consolidation and chat.",
    "changing": "Changing what is stored: edit, remove, restore (manage), undo, and the review of learned facts.",
    "moving": "Moving memories in and out: import, export, and sync with a git remote (merge).",
}
SOURCES = ("memvault", "tests", "bench", "tools")
NAME = re.compile(r"(?<![\w/.])memvault\.([a-z_]+)\b")
PATH = re.compile(r"(?<![\w.])memvault/([a-z_]+)\.py\b")
FROM_PKG = re.compile(r"^(?P<indent>[ \t]*)from memvault import (?P<names>\([^)]*\)|[^\n#]+?)(?P<comment>[ \t]*#[^\n]*)?$",
                      re.M)


def new_name(old: str) -> str | None:
    return f"memvault.{MOVES[old]}" if old in MOVES else None


def split_from_package(match: re.Match) -> str:
    """`from memvault import a, b as c` -> one line per package the names now live in."""
    indent, comment = match["indent"], match["comment"] or ""
    names = [n.strip() for n in match["names"].strip("()").replace("\n", " ").split(",") if n.strip()]
    lines: dict[str, list[str]] = {}
    for item in names:
        name, _, alias = item.partition(" as ")
        name, alias = name.strip(), alias.strip()
        if name in MOVES:
            package, _, leaf = MOVES[name].rpartition(".")
            # a renamed module keeps the name it was used by, unless the alias gave one already
            local = alias or (name if leaf != name else "")
            lines.setdefault(f"memvault.{package}", []).append(f"{leaf} as {local}" if local and local != leaf else leaf)
        else:
            lines.setdefault("memvault", []).append(item)
    out = [f"{indent}from {package} import {', '.join(items)}" for package, items in lines.items()]
    if comment and out:
        out[-1] += comment
    return "\n".join(out)


def rewrite(text: str) -> str:
    text = FROM_PKG.sub(split_from_package, text)
    text = NAME.sub(lambda m: new_name(m[1]) or m[0], text)
    return PATH.sub(lambda m: f"memvault/{MOVES[m[1]].replace('.', '/')}.py" if m[1] in MOVES else m[0], text)


def main() -> int:
    pkg = ROOT / "memvault"
    if not (pkg / "cli.py").exists() or (pkg / "faces").exists():
        print("relayout: the tree is not in the flat layout (memvault/cli.py missing or memvault/faces/ there)")
        return 1
    for package, says in PACKAGES.items():
        (pkg / package).mkdir()
        (pkg / package / "__init__.py").write_text(f'"""{says}"""\n')
    for old, new in MOVES.items():
        target = pkg / (new.replace(".", "/") + ".py")
        subprocess.run(["git", "mv", str(pkg / f"{old}.py"), str(target)], cwd=ROOT, check=True)
    subprocess.run(["git", "add", *(f"memvault/{p}/__init__.py" for p in PACKAGES)], cwd=ROOT, check=True)
    changed = []
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == Path(__file__).resolve():
                continue
            text = path.read_text()
            new = rewrite(text)
            if new != text:
                path.write_text(new)
                changed.append(path.relative_to(ROOT))
    extra = [ROOT / "pyproject.toml", ROOT / ".ci" / "run", ROOT / "tests" / "zsh_capture.zsh"]
    for path in extra:
        if path.exists():
            text = path.read_text()
            new = rewrite(text)
            if new != text:
                path.write_text(new)
                changed.append(path.relative_to(ROOT))
    print(f"relayout: {len(MOVES)} modules moved into {len(PACKAGES)} packages; imports rewritten in {len(changed)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
