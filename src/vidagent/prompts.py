"""Prompts with a contract: each template beside its token budget and stop strings.

Templates live next to the code that uses them, in ``<package>/prompts/<family>.toml``: one file per
planner or tool family, one table per prompt (the table's name is the prompt's name, unique in its
package)::

    [force_final]
    max_tokens = 80                     # the reply's token budget (leave it out for a fragment)
    stop = ["\\nObservation:"]          # stop strings (default: none)
    text = '''
    You are out of steps. Give your {answer_format} now.
    '''

``text`` is a TOML literal string: what is between the quotes is sent as it is (no escapes; the newline
right after the opening quotes is not part of it). A table without ``max_tokens`` is a fragment: text
that is put into another prompt or read as data, never sent alone.

A placeholder is ``{identifier}``. Rendering is strict: a placeholder without a value, or a value no
placeholder takes, raises ``PromptError``. Other braces (JSON examples) stay as they are, and
``{{identifier}}`` is the escape for a literal ``{identifier}``. Values are inserted in one pass: a
``{name}`` inside a value is never substituted again.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from types import MappingProxyType
from typing import Mapping

from vidagent.errors import PromptError

ROOT_PACKAGE = "vidagent"
_PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
_FIELDS = frozenset({"text", "max_tokens", "stop"})


def placeholders(template: str) -> frozenset[str]:
    """The names of the ``{placeholders}`` in ``template`` (escaped ``{{name}}`` not counted)."""
    return frozenset(match.group(2) for match in _PLACEHOLDER.finditer(template) if match.group(2))


def render(template: str, /, **values: object) -> str:
    """Fill every ``{placeholder}`` of ``template`` with its value, strictly (see the module's doc)."""
    return _render(template, values, "template")


def _render(template: str, values: Mapping[str, object], name: str) -> str:
    wanted = placeholders(template)
    missing, unused = wanted - values.keys(), values.keys() - wanted
    if missing or unused:
        problems = ([f"no value for {', '.join(sorted(missing))}"] if missing else []) + (
            [f"{', '.join(sorted(unused))} not in the template"] if unused else [])
        raise PromptError(f"prompt {name}: " + "; ".join(problems))

    def fill(match: re.Match[str]) -> str:
        escaped, key = match.groups()
        return "{" + escaped + "}" if escaped else str(values[key])

    return _PLACEHOLDER.sub(fill, template)


@dataclass(frozen=True)
class Prompt:
    """One template and its contract: the reply's token budget and stop strings.

    ``max_tokens`` is ``None`` for a fragment (text put into another prompt or read as data).
    """

    name: str
    text: str
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()

    @property
    def placeholders(self) -> frozenset[str]:
        return placeholders(self.text)

    @property
    def budget(self) -> int:
        """``max_tokens`` of a prompt that is sent to a model; a fragment has none and raises."""
        if self.max_tokens is None:
            raise PromptError(f"prompt {self.name} is a fragment: it has no max_tokens")
        return self.max_tokens

    def render(self, **values: object) -> str:
        """The text with every placeholder filled (strict: see ``render``)."""
        return _render(self.text, values, self.name)


def _prompt(name: str, table: object, where: str) -> Prompt:
    """One table of a prompt file, checked."""
    if not isinstance(table, dict):
        raise PromptError(f"{where}: {name} is not a table")
    if set(table) - _FIELDS or "text" not in table:
        raise PromptError(f"{where}: [{name}] needs text and may have max_tokens and stop, "
                          f"not {', '.join(sorted(set(table) - _FIELDS)) or 'no text'}")
    text, max_tokens, stop = table["text"], table.get("max_tokens"), table.get("stop", [])
    if not isinstance(text, str):
        raise PromptError(f"{where}: [{name}] text is not a string")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        raise PromptError(f"{where}: [{name}] max_tokens must be a positive integer")
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise PromptError(f"{where}: [{name}] stop must be a list of non-empty strings")
    return Prompt(name, text, max_tokens, tuple(stop))


def _files(package: str) -> list[Traversable]:
    folder = resources.files(package).joinpath("prompts")
    if not folder.is_dir():
        return []
    return sorted((f for f in folder.iterdir() if f.name.endswith(".toml")), key=lambda f: f.name)


@lru_cache(maxsize=None)
def prompts(package: str) -> Mapping[str, Prompt]:
    """Every prompt of ``package`` (from all its ``prompts/*.toml`` files), read once."""
    found: dict[str, Prompt] = {}
    for file in _files(package):
        where = f"{package}/prompts/{file.name}"
        try:
            tables = tomllib.loads(file.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as error:
            raise PromptError(f"{where} is not valid TOML: {error}") from None
        for name, table in tables.items():
            if name in found:
                raise PromptError(f"{where}: prompt {name} is defined twice in {package}")
            found[name] = _prompt(name, table, where)
    return MappingProxyType(found)


def prompt(package: str, name: str) -> Prompt:
    """The prompt ``name`` of ``package`` (``PromptError`` if there is none)."""
    try:
        return prompts(package)[name]
    except KeyError:
        raise PromptError(f"{package} has no prompt {name}") from None


def load_prompt(package: str, name: str) -> str:
    """The text of the prompt ``name`` of ``package``, unrendered (for fragments and data)."""
    return prompt(package, name).text


def prompt_packages() -> list[str]:
    """The packages of vidagent that ship prompts, sorted."""
    root = resources.files(ROOT_PACKAGE)
    return sorted(f"{ROOT_PACKAGE}.{entry.name}" for entry in root.iterdir()
                  if entry.is_dir() and _files(f"{ROOT_PACKAGE}.{entry.name}"))


@lru_cache(maxsize=1)
def prompts_digest() -> str:
    """sha256 of every shipped prompt file's name and bytes, in a fixed order (no paths, no times):
    it changes exactly when a template, budget or stop string does."""
    digest = hashlib.sha256()
    for package in prompt_packages():
        for file in _files(package):
            digest.update(f"{package}/{file.name}\0".encode("utf-8"))
            digest.update(file.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()
