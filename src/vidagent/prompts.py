"""Prompt templates are files kept next to the code that uses them (``<package>/prompts/*.txt``)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def load_prompt(package: str, name: str) -> str:
    """The text of ``<package>/prompts/<name>.txt``."""
    return resources.files(package).joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8")


def render(template: str, **values: object) -> str:
    """Fill ``{placeholders}``; other braces in the template are left alone."""
    text = template
    for key, value in values.items():
        text = text.replace("{" + key + "}", str(value))
    return text
