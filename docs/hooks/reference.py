"""MkDocs hook: the CLI and Python API reference pages, rendered from the code at build time.

``<!-- cli-reference -->`` becomes every command's ``--help`` (from ``vidagent.cli.build_parser``),
``<!-- api-reference -->`` the signature and docstring of every name ``vidagent`` exports, and ``<!-- readme -->``
(the home page) the repository's README with its links into ``docs/`` made relative to the site.
"""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    from vidagent.cli import build_parser

    found: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        found.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(f"{name} {sub_name}", sub)

    walk("vidagent", build_parser())
    return found


def cli_reference() -> str:
    parts = []
    for name, parser in _parsers():
        parser.prog = name
        parts.append(f"## `{name}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
    return "\n".join(parts)


def api_reference() -> str:
    import vidagent

    parts = []
    for name in sorted(vidagent.__all__, key=lambda n: (not inspect.isfunction(getattr(vidagent, n)), n.lower())):
        item = getattr(vidagent, name)
        try:
            signature = f"{name}{inspect.signature(item)}" if callable(item) else name
        except (TypeError, ValueError):
            signature = name
        kind = "class" if inspect.isclass(item) else "function" if callable(item) else "value"
        doc = inspect.getdoc(item) or ""
        parts.append(f"## `{name}`\n\n*{kind}* `{signature}`\n\n```text\n{doc}\n```\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (MkDocs's hook signature)
    if "<!-- cli-reference -->" in markdown:
        markdown = markdown.replace("<!-- cli-reference -->", cli_reference())
    if "<!-- readme -->" in markdown:
        markdown = markdown.replace("<!-- readme -->", README.read_text().replace("](docs/", "]("))
    if "<!-- api-reference -->" in markdown:
        markdown = markdown.replace("<!-- api-reference -->", api_reference())
    return markdown
