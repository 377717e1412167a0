"""The planner layer: the ``Planner`` protocol and the registry that finds planners by name.

A planner answers one ``Task`` with a ``Toolbox`` and a chat model and returns an ``Answer``
whose trace is the tree of steps it made. ReAct, MCTS and the baselines are planners; the CLI
(``vidagent ask --planner``), ``Session.ask(planner=...)`` and ``vidagent eval --planner`` all
go through ``build_planner``. Options (``--planner-option n=4``) are the fields of a planner's
dataclass, converted from text to the field's type.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import typing
from typing import Any, Callable, Mapping, Protocol, TypeVar, runtime_checkable

from vidagent.agent.answer import Answer
from vidagent.agent.steps import MemoryStep, Step, TaskStep, Trace
from vidagent.agent.task import Task
from vidagent.agent.toolbox import Toolbox
from vidagent.errors import PlannerError
from vidagent.llm.base import ChatModel
from vidagent.llm.metered import MeteredChat


@runtime_checkable
class Planner(Protocol):
    """``name``: how answers and reports call it. ``tools``: the tool names it offers its model
    (``None``: every tool the session has; ``()``: none). ``reads_memory``: whether it needs the
    video memory built. ``uses_llm``: whether it calls a chat model at all (if not, ``run`` may be
    given ``None`` for ``llm``)."""

    name: str
    tools: tuple[str, ...] | None
    reads_memory: bool
    uses_llm: bool

    def run(self, task: Task, toolbox: Toolbox, llm: ChatModel | None, trace: Trace | None = None) -> Answer: ...


P = TypeVar("P")
_REGISTRY: dict[str, Callable[..., Planner]] = {}


def register_planner(name: str) -> Callable[[P], P]:
    """Class decorator: make a planner available by ``name`` everywhere a planner is chosen."""

    def add(factory: P) -> P:
        _REGISTRY[name] = factory  # type: ignore[assignment]
        return factory

    return add


def planner_names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def build_planner(name: str, options: Mapping[str, Any] | None = None) -> Planner:
    """The planner registered as ``name`` (or ``package.module:Factory``) built with ``options``.

    Option values may be text (from the command line): they are converted to the type of the
    planner's field of that name. An unknown planner or option is a ``PlannerError``.
    """
    factory = _factory(name)
    options = dict(options or {})
    if dataclasses.is_dataclass(factory):
        options = _typed_options(factory, options, name)
    try:
        planner = factory(**options)
    except TypeError as error:
        raise PlannerError(f"planner {name!r}: {error}") from None
    except ValueError as error:
        raise PlannerError(f"planner {name!r}: {error}") from None
    if not isinstance(planner, Planner):
        raise PlannerError(f"{name!r} did not make a planner (it needs name, tools, reads_memory, uses_llm and run)")
    return planner


def parse_options(pairs: list[str] | None) -> dict[str, str]:
    """``["n=4", "strategy=dfs"]`` as a dict; a pair without ``=`` is a ``PlannerError``."""
    options: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise PlannerError(f"a planner option is KEY=VALUE, got {pair!r}")
        options[key.strip().replace("-", "_")] = value.strip()
    return options


def start(task: Task, trace: Trace | None, toolbox: Toolbox | None = None) -> tuple[Trace, Step]:
    """What every planner does first: open the trace (the caller's, if given) with the task as its
    root, followed by a ``MemoryStep`` of the memory selection (which memories were built for the
    question, with the model's reply) and one of the experience replayed, when the toolbox holds
    them. The step returned is the one the planner's own steps follow."""
    trace = trace if trace is not None else Trace()
    root: Step = trace.add(TaskStep(question=task.question, choices=list(task.choices) if task.choices else None,
                                    sources=[s.id for s in task.sources]))
    selection = toolbox.selection if toolbox is not None else None
    if selection is not None and selection.how != "built":  # a decision was made (not an object memory found)
        root = trace.add(MemoryStep(parent_id=root.id, action="selected", text=selection.describe(),
                                    model_output=selection.model_output, **selection.cost))
    replay = toolbox.replay if toolbox is not None else None
    if replay:
        root = trace.add(MemoryStep(parent_id=root.id, action="replayed", text=replay.describe(),
                                    model_output=replay.rating_output, **replay.cost))
    return trace, root


def metered(llm: ChatModel) -> MeteredChat:
    """The model with its usage counted; a caller's ``MeteredChat`` is kept as it is, so the calls
    the tools make through it count towards the same answer."""
    return llm if isinstance(llm, MeteredChat) else MeteredChat(llm)


def _factory(name: str) -> Callable[..., Planner]:
    _load_builtin()
    if name in _REGISTRY:
        return _REGISTRY[name]
    if ":" in name:
        module_name, _, attribute = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as error:
            raise PlannerError(f"cannot load planner {name!r}: {error}") from None
        # only a class with a ``run`` method: any other callable (``os:system``) would be called with the options
        if not inspect.isclass(factory) or not callable(getattr(factory, "run", None)):
            raise PlannerError(f"{name!r} is not a planner class (a class with name, tools, reads_memory, uses_llm "
                               f"and run)")
        return factory  # type: ignore[no-any-return]
    raise PlannerError(f"unknown planner {name!r}: use one of {', '.join(sorted(_REGISTRY))} or module:Class")


def _typed_options(factory: Any, options: dict[str, Any], name: str) -> dict[str, Any]:
    hints = typing.get_type_hints(factory)
    known = {f.name for f in dataclasses.fields(factory) if f.init}
    typed = {}
    for key, value in options.items():
        if key not in known:
            offered = f"options: {', '.join(sorted(known))}" if known else "it takes no options"
            raise PlannerError(f"planner {name!r} has no option {key!r} ({offered})")
        typed[key] = _convert(value, hints.get(key), key, name)
    return typed


def _convert(value: Any, hint: Any, key: str, name: str) -> Any:
    """An option value (text from a command line, or a Python value) as the field's type."""
    kinds = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    optional = type(None) in typing.get_args(hint)
    kind = kinds[0]
    if optional and (value is None or (isinstance(value, str) and value.strip().lower() in ("none", ""))):
        return None
    if typing.get_origin(kind) is tuple:  # a list of names: "when,why,caption_retrieval"
        parts = value.split(",") if isinstance(value, str) else list(value)
        return tuple(str(part).strip() for part in parts if str(part).strip())
    wrong = PlannerError(f"planner {name!r}: option {key} must be {getattr(kind, '__name__', kind)}, got {value!r}")
    if kind is bool:
        if isinstance(value, bool):
            return value
        lowered = str(value).strip().lower()
        if lowered not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
            raise wrong
        return lowered in ("1", "true", "yes", "on")
    if kind is int:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise wrong
        try:
            return int(value)
        except (TypeError, ValueError, OverflowError):
            raise wrong from None
    if kind is float:
        if isinstance(value, bool):
            raise wrong
        try:
            return float(value)
        except (TypeError, ValueError):
            raise wrong from None
    return value


def _load_builtin() -> None:
    """Import the built-in planners so they register (imported late: they import this module)."""
    from vidagent.agent import baselines, mcts, peil, react, traveler  # noqa: F401
