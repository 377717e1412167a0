"""A tool's declaration: its catalogue facts, stated where the tool is made.

A builder (``TemporalTools``, ``AssistModules``, ...) declares each of its tools on the method that is
the tool's function, with ``@declared(...)``: the method's name is the tool's name, and the builder makes
the tool with ``made(self.method, description, parameters)``. A tool made from a value rather than a method
(DoraemonGPT's sub-task tools, one per kind) is declared with ``declare(...)`` in a class attribute of its
builder. ``tools.catalogue`` gathers the declarations of every builder (``declarations``); nothing else
lists a tool. The facts:

- ``form``: ``segments`` (VideoAgent's and DoraemonGPT's tools over one video, called with segment ids,
  times or sub-questions) or ``source`` (AssistGPT's modules, called with ``visual[i]``);
- ``reads``: ``descriptions`` (the memory's frame descriptions or captions), ``pixels`` (frames decoded
  from the file, or an image), ``speech``, ``text`` (on-screen text), ``objects`` (the object memory),
  ``model`` (it asks a chat or vision model), ``files`` (it writes a file);
- ``needs``: what a source must have for the tool to be offered at all (empty: it answers from whatever
  there is, and says what it lacks);
- ``refines``: it reads a stretch whole, so a partial (glanced) memory is described in full there first;
- ``offered``: offered by a planner that takes every tool (False: only when the planner's ``tools``
  option names it);
- ``capabilities``: the capabilities (``tools.capabilities.CAPABILITIES``) it is a form of, the ones it
  calls itself;
- ``sets``: the named tool sets it belongs to (``videoagent``, ``doraemongpt``): the planners' default
  tool lists and the names their ``tools`` option takes for a set;
- ``does``: the jobs a planner looks a tool up by instead of by name (``overview``: reads segments by id
  for the opening overview; ``looks``: asks the visual-QA model about segments, pointless when that model
  only reads descriptions; ``describes_frames`` and ``asks_frames``: TraveLER's look at a window of
  frames; ``looks_first``: AssistGPT's first look at a source of a kind it ``accepts``);
- ``accepts``: for a module, the kinds of source its ``visual[i]`` takes (empty: it takes no source).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Sequence, TypeVar

from vidagent.tools.base import Observation, Parameter, Tool

Form = Literal["segments", "source"]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Declaration:
    name: str
    form: Form
    reads: frozenset[str]
    needs: frozenset[str] = frozenset()
    refines: bool = False
    offered: bool = True
    capabilities: tuple[str, ...] = ()
    sets: frozenset[str] = frozenset()
    does: frozenset[str] = frozenset()
    accepts: tuple[str, ...] = ()


def declare(name: str, form: Form, reads: str, *, needs: str = "", refines: bool = False, offered: bool = True,
            of: str = "", sets: str = "", does: str = "", accepts: Sequence[str] = ()) -> Declaration:
    """A declaration from words (space-separated lists)."""
    return Declaration(name, form, frozenset(reads.split()), frozenset(needs.split()), refines, offered,
                       tuple(of.split()), frozenset(sets.split()), frozenset(does.split()), tuple(accepts))


def declared(form: Form, reads: str, **facts: Any) -> Callable[[F], F]:
    """Method decorator: the method is the function of a tool named as the method, with these facts."""

    def mark(function: F) -> F:
        function.declaration = declare(function.__name__, form, reads, **facts)  # type: ignore[attr-defined]
        return function

    return mark


def declaration_of(function: Callable[..., Any]) -> Declaration:
    """The declaration of a tool's function (a ``@declared`` method); a ``TypeError`` for an undeclared one."""
    found = getattr(function, "declaration", None)
    if not isinstance(found, Declaration):
        raise TypeError(f"{getattr(function, '__name__', function)!r} is not declared as a tool (@declared)")
    return found


def made(function: Callable[..., Observation], description: str, parameters: tuple[Parameter, ...],
         given: tuple[str, ...] = ()) -> Tool:
    """The tool whose function is the ``@declared`` method ``function``, named as it is declared."""
    return Tool(declaration_of(function).name, description, parameters, function, given)


def declarations(builder: type) -> Iterator[Declaration]:
    """A builder's declarations in the order it states them: its ``@declared`` methods and its class
    attributes holding declarations (or tuples or dicts of them)."""
    for value in vars(builder).values():
        found = getattr(value, "declaration", value)
        items = tuple(found.values()) if isinstance(found, dict) else found if isinstance(found, tuple) else (found,)
        yield from (item for item in items if isinstance(item, Declaration))
