"""The registry that finds planners by name, and the rule that picks one when none is named.

The built-in planners are listed here by module path and imported when first asked for (they
import ``planning``, never this module, so there is no import circle); ``register_planner`` adds
others. The CLI (``vidagent ask --planner``), ``Session.ask(planner=...)``, the server and
``vidagent eval --planner`` all go through ``build_planner``. Options (``--planner-option n=4``)
are the fields of a planner's dataclass, converted from text to the field's type.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import types
import typing
from typing import Any, Callable, Mapping, Sequence, TypeVar

from vidagent.agent.planning import Needs, Planner
from vidagent.errors import PlannerError

__all__ = ["Needs", "Planner", "build_planner", "default_choice", "default_planner", "knowledge_planners", "parse_options", "planner_config",
           "planner_for", "planner_options", "PlannerOption", "planner_names", "register_planner"]

BUILTIN_PLANNERS = {
    "blind": "vidagent.agent.baselines:BlindPlanner",
    "caption_only": "vidagent.agent.baselines:CaptionOnlyPlanner",
    "mcts": "vidagent.agent.mcts:MCTSPlanner",
    "peil": "vidagent.agent.peil:PEILPlanner",
    "random": "vidagent.agent.baselines:RandomPlanner",
    "react": "vidagent.agent.react:ReActPlanner",
    "traveler": "vidagent.agent.traveler:TravelerPlanner",
}
ONE_VIDEO_PLANNER = "react"  # VideoAgent's ReAct: the default for a question about one video
MANY_SOURCES_PLANNER = "peil"  # AssistGPT's PEIL: the default for images or several sources
EMBEDDED_ONE_VIDEO_PLANNER = "caption_only"  # with the embedded model: a few chosen lines, options scored
EMBEDDED_DEFAULT_OPTIONS: Mapping[str, Any] = {"lines": 5, "choose_by": "auto"}
"""How the default answers a question about one video with the embedded 1.5B model, which neither chooses tools
(react answered after its overview in 118 of 126 benchmark questions) nor reads long contexts well: five evenly
spread lines of the memory, and the options scored, by their texts where they are sentences and by their numbers
in every order where they are short phrases (EgoSchema dev 47.0 %, NExT-QA dev 56.0 % on 200: the README's
"Small models")."""


def default_description() -> str:
    """The default planner in words, written once for every face (the CLI's help, the API, MCP, the docs)."""
    lines = EMBEDDED_DEFAULT_OPTIONS["lines"]
    return (f"for one video {EMBEDDED_ONE_VIDEO_PLANNER} reading {lines} lines of the memory with the options scored, "
            f"with the embedded model ({ONE_VIDEO_PLANNER} with an endpoint); {MANY_SOURCES_PLANNER} for images or "
            f"several sources")


def default_planner(kinds: Sequence[str], *, embedded: bool = False) -> str:
    """The planner used when none is named, for sources of these kinds (``video``/``image``, in order);
    ``embedded``: the chat model is the embedded local one (a strong endpoint keeps the papers' planners)."""
    if list(kinds) != ["video"]:
        return MANY_SOURCES_PLANNER
    return EMBEDDED_ONE_VIDEO_PLANNER if embedded else ONE_VIDEO_PLANNER


def default_choice(kinds: Sequence[str], options: Mapping[str, Any] | None = None, *,
                   embedded: bool = False) -> tuple[str, dict[str, Any]]:
    """The default planner's name for these sources and its options: its defaults under the caller's ``options``
    (what ``vidagent ask`` and ``vidagent eval`` run when no planner is named)."""
    chosen = default_planner(kinds, embedded=embedded)
    defaults = EMBEDDED_DEFAULT_OPTIONS if embedded and chosen == EMBEDDED_ONE_VIDEO_PLANNER else {}
    return chosen, {**defaults, **dict(options or {})}


def planner_for(name: str | None, options: Mapping[str, Any] | None, kinds: Sequence[str], *,
                embedded: bool = False) -> Planner:
    """The planner named ``name`` with ``options``, or when none is named the default for these sources, with
    its default options under the caller's."""
    if name:
        return build_planner(name, options)
    return build_planner(*default_choice(kinds, options, embedded=embedded))


P = TypeVar("P")
_REGISTERED: dict[str, Callable[..., Planner]] = {}  # planners added with register_planner


def register_planner(name: str) -> Callable[[P], P]:
    """Class decorator: make a planner available by ``name`` everywhere a planner is chosen."""

    def add(factory: P) -> P:
        _REGISTERED[name] = factory  # type: ignore[assignment]
        return factory

    return add


def planner_names() -> list[str]:
    return sorted({*BUILTIN_PLANNERS, *_REGISTERED})


def knowledge_planners() -> list[str]:
    """The planners that offer their model the user's knowledge sources (by their default ``Needs``), for
    the messages that refuse knowledge to one that does not."""
    return [name for name in planner_names() if build_planner(name).needs.knowledge]


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
        raise PlannerError(f"{name!r} did not make a planner (it needs name, needs and run)")
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


def _factory(name: str) -> Callable[..., Planner]:
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in BUILTIN_PLANNERS:
        return _load(BUILTIN_PLANNERS[name], name)
    if ":" in name:
        module_name, _, attribute = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as error:
            raise PlannerError(f"cannot load planner {name!r}: {error}") from None
        # only a class with a ``run`` method: any other callable (``os:system``) would be called with the options
        if not inspect.isclass(factory) or not callable(getattr(factory, "run", None)):
            raise PlannerError(f"{name!r} is not a planner class (a class with name, needs and run)")
        return factory  # type: ignore[no-any-return]
    raise PlannerError(f"unknown planner {name!r}: use one of {', '.join(planner_names())} or module:Class")


def planner_config(planner: Planner) -> dict[str, Any]:
    """Every option of a built planner with the value it runs with (the given ones and the defaults), as plain JSON
    values: what an evaluation run's identity records, so that a default changed later never mixes rows."""
    if not dataclasses.is_dataclass(planner):
        return {}
    values = {f.name: getattr(planner, f.name) for f in dataclasses.fields(planner) if f.init}
    return {key: list(value) if isinstance(value, tuple) else value for key, value in sorted(values.items())}


@dataclasses.dataclass(frozen=True)
class PlannerOption:
    """One option of a registered planner, as ``vidagent settings`` lists it: its default, as a plain JSON value,
    and the range ``build_planner`` accepts (None: any value of its type)."""

    planner: str
    name: str
    default: Any
    bounds: tuple[float, float] | None


def planner_options() -> list[PlannerOption]:
    """Every option of every registered planner (the fields of its dataclass), in the planners' order: all of a
    planner's settings, each set with ``--planner-option`` and named in an evaluation run's identity."""
    found = []
    for name in planner_names():
        planner = build_planner(name)
        bounds = {f.name: f.metadata.get("range") for f in dataclasses.fields(planner)} \
            if dataclasses.is_dataclass(planner) else {}
        found += [PlannerOption(name, key, value, bounds.get(key)) for key, value in planner_config(planner).items()]
    return found


def _load(path: str, name: str) -> Callable[..., Planner]:
    module_name, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module_name), attribute)  # type: ignore[no-any-return]


def _typed_options(factory: Any, options: dict[str, Any], name: str) -> dict[str, Any]:
    hints = typing.get_type_hints(factory)
    fields = {f.name: f for f in dataclasses.fields(factory) if f.init}
    typed = {}
    for key, value in options.items():
        if key not in fields:
            offered = f"options: {', '.join(sorted(fields))}" if fields else "it takes no options"
            raise PlannerError(f"planner {name!r} has no option {key!r} ({offered})")
        typed[key] = _convert(value, hints.get(key), key, name)
        _check_range(typed[key], fields[key].metadata.get("range"), key, name)
    return typed


def _check_range(value: Any, bounds: tuple[float, float] | None, key: str, name: str) -> None:
    """A number (each number of a tuple) must be finite and, where the option declares a range
    (``planning.option``), inside it."""
    if isinstance(value, tuple):
        for item in value:
            _check_range(item, bounds, key, name)
        return
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    low, high = bounds if bounds is not None else (-math.inf, math.inf)
    if not math.isfinite(value) or not low <= value <= high:
        where = f"between {low:g} and {high:g}" if bounds is not None else "a finite number"
        raise PlannerError(f"planner {name!r}: option {key} must be {where}, got {value!r}")


def _convert(value: Any, hint: Any, key: str, name: str) -> Any:
    """An option value (text from a command line, or a Python value) as the field's type."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)  # ``X | None``: X is the kind
    kinds = [a for a in typing.get_args(hint) if a is not type(None)] if union else [hint]
    optional = union and type(None) in typing.get_args(hint)
    kind = kinds[0]
    if optional and (value is None or (isinstance(value, str) and value.strip().lower() in ("none", ""))):
        return None
    if typing.get_origin(kind) is tuple:  # a list of names ("when,why,caption_retrieval") or numbers ("0,0.5,1")
        parts = value.split(",") if isinstance(value, str) else list(value)
        item = typing.get_args(kind)[0] if typing.get_args(kind) else str
        if item is str:
            return tuple(str(part).strip() for part in parts if str(part).strip())
        return tuple(_convert(part, item, key, name) for part in parts if str(part).strip())
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
