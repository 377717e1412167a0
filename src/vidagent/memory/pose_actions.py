"""Verbs from a person's pose over consecutive frames: postures held (stands, sits, kneels, lies,
bends over), changes between them (sits down, stands up, kneels down, lies down, sits up, straightens
up) and arms (raises an arm, raises both arms, stretches out an arm, touches the face).

The input is, per sampled frame the person was seen in, the keys of
``vidagent.perception.pose_words.PoseFacts`` (``"sitting"``, ``"arm_raised"``, ...). A frame whose
posture was not told (too few keypoints, legs hidden) is skipped for postures; samples further apart
than ``MAX_STEP_S`` are not consecutive, so no change is read across them. A held posture or arm is a
span from its first to its last consecutive sample (one sample: a moment); a change is the span from
the last sample of the old posture to the first of the new one (the change happened in between).

Confidence: a posture seen in one frame only is the least sure (MoveNet on one frame, 0.6); seen in
consecutive frames 0.8; a change, read from two frames, 0.7.
"""

from __future__ import annotations

from functools import cache
from typing import Sequence

from vidagent.memory.actions import POSE, Action
from vidagent.perception.pose_words import phrases

POSTURE_VERBS = {"standing": "stands", "sitting": "sits", "kneeling": "kneels", "lying": "lies",
                 "bending": "bends over"}
# (from, to) -> the change's verb; "*" stands for any other posture. Bending over is a held posture only.
CHANGES = {("lying", "sitting"): "sits up", ("*", "sitting"): "sits down", ("bending", "standing"): "straightens up",
           ("*", "standing"): "stands up", ("*", "lying"): "lies down", ("*", "kneeling"): "kneels down"}
# arm keys -> (verb for one arm, verb for both); hand_at_face has one verb
ARM_VERBS = {"raised": ("raises an arm", "raises both arms"), "out": ("stretches out an arm", "stretches out both arms")}
FACE_VERB = "touches the face"
MAX_STEP_S = 5.0
ONE_SAMPLE, HELD, CHANGE = 0.6, 0.8, 0.7

Samples = Sequence[tuple[float, frozenset[str]]]


def pose_actions(object_id: int, samples: Samples) -> list[Action]:
    """The postures, changes and arm actions of one person from its pose keys over time."""
    samples = sorted(samples, key=lambda s: s[0])
    postures = [(t, _posture(keys)) for t, keys in samples]
    postures = [(t, p) for t, p in postures if p is not None]
    found = []
    for start, end, posture, count in _held(postures):
        found.append(Action(object_id, POSTURE_VERBS[posture], start, end, POSE, HELD if count > 1 else ONE_SAMPLE))
    for (t_old, old), (t_new, new) in zip(postures[:-1], postures[1:]):
        verb = _change(old, new)  # type: ignore[arg-type]
        if verb and t_new - t_old <= MAX_STEP_S:
            found.append(Action(object_id, verb, t_old, t_new, POSE, CHANGE))
    for arm, (one, both) in ARM_VERBS.items():
        marks = [(t, _arms(keys, arm)) for t, keys in samples]
        for start, end, value, count in _held([(t, v) for t, v in marks if v]):
            found.append(Action(object_id, both if value == 2 else one, start, end, POSE,
                                HELD if count > 1 else ONE_SAMPLE))
    at_face = [(t, "face") for t, keys in samples if "hand_at_face" in keys]
    for start, end, _, count in _held(at_face):
        found.append(Action(object_id, FACE_VERB, start, end, POSE, HELD if count > 1 else ONE_SAMPLE))
    return found


def pose_keys(words: str) -> frozenset[str]:
    """The ``PoseFacts`` keys of pose words as the frames stage stores them (``"sitting, one arm raised"``;
    ``pose_words.json`` says each fact in one phrase): an exact lookup of each phrase, unknown ones left out."""
    keys = _keys_of_phrases()
    return frozenset(keys[part.strip()] for part in words.split(",") if part.strip() in keys)


@cache
def _keys_of_phrases() -> dict[str, str]:
    return {phrase: key for key, phrase in phrases().items()}


def _posture(keys: frozenset[str]) -> str | None:
    return next((key for key in keys if key in POSTURE_VERBS), None)


def _arms(keys: frozenset[str], arm: str) -> int:
    """2 when both arms are ``arm`` ("raised", "out"), 1 when one is, else 0."""
    return 2 if f"arms_{arm}" in keys else 1 if f"arm_{arm}" in keys else 0


def _change(old: str, new: str) -> str | None:
    if old == new:
        return None
    return CHANGES.get((old, new)) or CHANGES.get(("*", new))


def _held(marks: Sequence[tuple[float, object]]) -> list[tuple[float, float, object, int]]:
    """Runs of consecutive samples with one value: ``(first time, last time, value, samples)``; a step
    longer than ``MAX_STEP_S`` ends a run. For arm marks the run's value is the largest seen."""
    runs: list[tuple[float, float, object, int]] = []
    for time_s, value in marks:
        if runs:
            start, end, current, count = runs[-1]
            same = current == value or (isinstance(value, int) and isinstance(current, int))
            if same and time_s - end <= MAX_STEP_S:
                larger = max(current, value) if isinstance(value, int) else current  # type: ignore[type-var]
                runs[-1] = (start, time_s, larger, count + 1)
                continue
        runs.append((time_s, time_s, value, 1))
    return runs
