"""Each layer imports only the layers below it (DESIGN.md, "Layers and what each may know").

video < perception < memory < tools < agent < eval / cli / server; llm beside perception, below tools;
knowledge (the files a user attaches to a question, read and embedded) beside memory, below tools;
experience (what is learnt across questions, model-free) above tools and below agent. config, errors,
prompts, parallel, sqlite and text are ground every layer may stand on, and stand on nothing but
ground; models/ (the installer) is stood on like ground but reaches into perception for assets, so it
is not checked. Every top-level module is named in ``TOP_LEVEL_MODULES``. Imports inside functions
count too: a lazy import still ties the layers together.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "vidagent"
ABOVE = {  # layer -> the layers it must not import
    "ground": {"video", "llm", "perception", "memory", "knowledge", "tools", "experience", "agent", "eval", "server",
               "cli"},
    "video": {"llm", "perception", "memory", "knowledge", "tools", "experience", "agent", "eval", "server", "cli"},
    "llm": {"video", "perception", "memory", "knowledge", "tools", "experience", "agent", "eval", "server", "cli"},
    "perception": {"llm", "memory", "knowledge", "tools", "experience", "agent", "eval", "server", "cli"},
    "memory": {"llm", "knowledge", "tools", "experience", "agent", "eval", "server", "cli"},
    "knowledge": {"llm", "memory", "tools", "experience", "agent", "eval", "server", "cli"},
    "tools": {"experience", "agent", "eval", "server", "cli"},
    "experience": {"agent", "eval", "server", "cli"},
    "agent": {"eval", "server", "cli"},
    "eval": {"server", "cli"},
}
FACES = {"server", "cli"}  # the top: they may import every layer
TOP_LEVEL_MODULES = {"config": "ground", "errors": "ground", "prompts": "ground", "parallel": "ground",
                     "sqlite": "ground", "text": "ground", "chat_http": "ground", "redaction": "ground",
                     "models": "installer", "__init__": "agent", "session": "agent", "api": "agent", "cli": "cli",
                     "index_cli": "cli", "import_cli": "cli", "pack_cli": "cli", "experience_cli": "cli",
                     "utility_cli": "cli", "search_cli": "cli"}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "vidagent" or len(parts) < 2:
        return None
    return TOP_LEVEL_MODULES.get(parts[1], parts[1])


def _imports(path: Path) -> list[tuple[int, str]]:
    module = ".".join(("vidagent", *path.relative_to(PACKAGE).with_suffix("").parts))
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module.removesuffix(".__init__")
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names = [f"{base}.{alias.name}" for alias in node.names] if base == "vidagent" else [base]
            found += [(node.lineno, name) for name in names]
    return found


@pytest.mark.parametrize("layer", sorted(ABOVE))
def test_no_layer_imports_a_layer_above_it(layer):
    files = [PACKAGE / f"{name}.py" for name, owner in TOP_LEVEL_MODULES.items() if owner == layer]
    folders = [name for name, owner in TOP_LEVEL_MODULES.items() if owner == layer] + [layer]
    files += [path for folder in folders if (PACKAGE / folder).is_dir()
              for path in sorted((PACKAGE / folder).rglob("*.py"))]
    wrong = [f"{path.relative_to(PACKAGE)}:{line} imports {name}"
             for path in files if path.is_file() for line, name in _imports(path) if _layer(name) in ABOVE[layer]]
    assert not wrong, "\n".join(wrong)


def test_every_top_level_module_has_a_layer():
    found = {path.stem for path in PACKAGE.glob("*.py")}
    found |= {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()} - set(ABOVE) - FACES
    unnamed = sorted(found - set(TOP_LEVEL_MODULES))
    assert not unnamed, f"name their layers in TOP_LEVEL_MODULES: {unnamed}"
    assert set(TOP_LEVEL_MODULES.values()) <= set(ABOVE) | FACES | {"installer"}
