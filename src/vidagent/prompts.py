"""Prompt templates are files kept next to the code that uses them (``<package>/prompts/*.txt``)."""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def load_prompt(package: str, name: str) -> str:
    """The text of ``<package>/prompts/<name>.txt``."""
    return resources.files(package).joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8")


def render(template: str, **values: object) -> str:
    """Fill ``{placeholders}`` in one pass; other braces in the template are left alone.

    A value is inserted as it is: a ``{name}`` inside a value is never substituted again.
    """
    if not values:
        return template
    names = "|".join(re.escape(key) for key in sorted(values, key=len, reverse=True))
    return re.sub(r"\{(" + names + r")\}", lambda match: str(values[match.group(1)]), template)
