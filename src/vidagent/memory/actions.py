"""Actions of the objects of a memory: what each tracked person or thing does, as short verbs with their
time spans (DoraemonGPT's space-dominant memory keeps an action per instance).

This module holds the types every source of verbs shares (it imports none of them); the verbs come from

* ``vidagent.memory.trajectory_actions``: an object's boxes over time (moves, walks, runs, stops,
  appears, disappears, enters, leaves) and two objects moving together (is carried / carries, is
  ridden / rides);
* ``vidagent.memory.pose_actions``: a person's pose words over consecutive frames (sits down, stands
  up, lies down, bends over, raises an arm, ...);
* a video classifier (``vidagent.memory.classified_actions``), when one is configured.

The stage (``vidagent.memory.stages.actions``) gathers the tracks and poses and puts the sources together.
Everything here is deterministic and reads no storage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

Box = tuple[float, float, float, float]

TRAJECTORY, POSE, CLASSIFIER = "trajectory", "pose", "classifier"  # the sources an action comes from
PERSON = "person"


@dataclass(frozen=True)
class Sighting:
    """One sampled detection of an object: when, and its box (``x1, y1, x2, y2`` in pixels)."""

    time_s: float
    box: Box


@dataclass(frozen=True)
class ObjectSightings:
    """An object of the memory with its sightings in time order."""

    object_id: int
    category: str
    sightings: tuple[Sighting, ...]

    @property
    def is_person(self) -> bool:
        return self.category == PERSON


@dataclass(frozen=True)
class Action:
    """One verb of one object over ``[start_s, end_s]`` (equal for a moment: "enters", "stops"), the
    source that found it, how sure it is (0-1) and, for a two-object action, the other object."""

    object_id: int
    verb: str
    start_s: float
    end_s: float
    source: str
    confidence: float
    other_id: int | None = None

    def row(self, action_id: int) -> tuple[Any, ...]:
        """Its ``actions`` row (without video_id)."""
        return (action_id, self.object_id, self.verb, round(self.start_s, 3), round(self.end_s, 3), self.source,
                round(self.confidence, 3), self.other_id)


def in_order(actions: Iterable[Action]) -> list[Action]:
    """Actions by start, then object, then verb: the order their ``action_id`` follows."""
    return sorted(actions, key=lambda a: (a.start_s, a.object_id, a.end_s, a.verb, a.other_id or -1))


def actions_text(actions: Sequence[Action]) -> str:
    """Actions of one object in a few words: ``"walks 0.0-3.5 s, sits down at 4.0 s"``."""
    parts = []
    for action in actions:
        when = (f"at {action.start_s:.1f} s" if action.end_s - action.start_s < 0.05
                else f"{action.start_s:.1f}-{action.end_s:.1f} s")
        other = f" object {action.other_id}" if action.other_id is not None else ""
        parts.append(f"{action.verb}{other} {when}")
    return ", ".join(parts)
