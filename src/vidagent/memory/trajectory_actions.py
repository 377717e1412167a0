"""Verbs from an object's boxes over time: moves / walks / runs, stops, appears / enters, disappears /
leaves; and from two objects moving together: is carried / carries, is ridden / rides.

**Speed.** Between consecutive sightings the object's speed is how far its box moved as a whole plus
how much it grew or shrank as a whole (so walking towards the camera counts), in object sizes per
second: ``hypot(dx, dy) / size / dt + |g| / dt``. Only rigid change counts: ``dx`` is the smaller
shift of the left and right edges when both shift the same way (else 0), ``dy`` likewise of the top
and bottom, and ``g`` the smaller of the width's and height's log change when both change the same
way. A box that changes shape (a person bending over or lying down, arms stretched out) moves one
edge, or widens as it flattens: that is the pose's to tell, not a walk. The size is a person's median
box height (so a person's speed is in body heights per second) and a thing's median square-root box
area. A single jittery interval is smoothed away by a running median of three. (Measured on the
shared clips: with the box centre instead, a woman bending over to her dog and a yoga flow on a mat
both read as "walks".)

**Moving and stopping.** A run of intervals at ``MOVE_SPEED`` or more lasting ``MIN_MOVE_S`` is a
"moves" span (for a person "walks", or "runs" when its median speed reaches ``RUN_SPEED``); a run
followed by ``MIN_STILL_S`` of sightings under that speed "stops" at the run's end. Intervals longer
than the gap limit (as in ``object_summary``: ``GAP_S``, or ``GAP_STEPS`` sampling intervals) break
runs. Where the camera's motion is known (``Camera``: ``memory.camera_motion`` follows the picture between
the sampled frames), each box is compared with where the camera alone would have carried the one
before, so a pan or a zoom does not move still things; where it is not (a picture too plain or too
fast to follow), speeds are the picture's.

**In and out of view.** A thing "appears" at its first sighting and "disappears" at its last unless
those lie within ``EDGE_S`` of the video's ends; a person "enters" and "leaves". A gap in the
sightings is a disappearance and a reappearance (less sure: the detector may have missed it).

**Together.** A thing that moves while its box centre stays inside a person's box (grown by
``CARRY_MARGIN``) and the two move alike (velocities within ``SAME_VELOCITY`` of the thing's) in at
least ``CARRY_SHARE`` of the run "is carried" by that person, who "carries" it; a vehicle or board
(``RIDDEN``) "is ridden" by a person or an animal, who "rides" it (and whose walks and runs over that
span are dropped: the rider's speed is the vehicle's).

The thresholds are reasoned, not measured on labelled clips: a walking person covers about 0.8 body
heights a second seen side-on, a runner 2-3; detector jitter of a few percent of a box at 2 sampled
frames a second reads as about 0.1-0.2 sizes a second.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from vidagent.memory.actions import TRAJECTORY, Action, Box, ObjectSightings, Sighting
from vidagent.memory.object_summary import EDGE_S, GAP_S, GAP_STEPS

MOVE_SPEED = 0.35  # object sizes per second
RUN_SPEED = 1.8  # body heights per second
MIN_MOVE_S = 0.9
MIN_STILL_S = 0.9
CARRY_MARGIN = 0.2  # of the carrier's box size, on every side
CARRY_SHARE = 0.6
SAME_VELOCITY = 0.5
# Where the camera alone carries a box seen at t0 by t1 (pixels): speeds are measured against it, so a pan or
# a zoom does not make still things move. ``still_camera`` when the camera's motion is not known.
Camera = Callable[[float, float, Box], Box]
RIDDEN = frozenset({"bicycle", "motorcycle", "skateboard", "surfboard", "skis", "snowboard", "horse"})
RIDERS = frozenset({"person", "dog", "cat"})
EDGE_CONFIDENCE, GAP_CONFIDENCE = 0.9, 0.6


def still_camera(t0: float, t1: float, box: Box) -> Box:
    """A camera that does not move: the box stays where it was."""
    return box


def trajectory_actions(track: ObjectSightings, duration_s: float, camera: Camera = still_camera) -> list[Action]:
    """What one object's sightings show: its moving runs, stops and comings and goings."""
    sightings = sorted(track.sightings, key=lambda s: s.time_s)
    if not sightings:
        return []
    found = _visibility(track, sightings, duration_s)
    for start, end, speed, still_s in _runs(track, sightings, camera):
        verb = "moves"
        if track.is_person:
            verb = "runs" if speed >= RUN_SPEED else "walks"
        sure = 0.5 + 0.45 * min(1.0, (end - start) / 3.0)
        found.append(Action(track.object_id, verb, start, end, TRAJECTORY, sure))
        if still_s >= MIN_STILL_S:
            found.append(Action(track.object_id, "stops", end, end, TRAJECTORY, 0.5 + 0.45 * min(1.0, still_s / 3.0)))
    return found


def _visibility(track: ObjectSightings, sightings: Sequence[Sighting], duration_s: float) -> list[Action]:
    come, go = ("enters", "leaves") if track.is_person else ("appears", "disappears")
    first, last = sightings[0].time_s, sightings[-1].time_s
    found = []
    if first > EDGE_S:
        found.append(Action(track.object_id, come, first, first, TRAJECTORY, EDGE_CONFIDENCE))
    if last < duration_s - EDGE_S:
        found.append(Action(track.object_id, go, last, last, TRAJECTORY, EDGE_CONFIDENCE))
    for before, after in _gaps([s.time_s for s in sightings]):
        found.append(Action(track.object_id, go, before, before, TRAJECTORY, GAP_CONFIDENCE))
        found.append(Action(track.object_id, come, after, after, TRAJECTORY, GAP_CONFIDENCE))
    return found


def _gap_limit(times: Sequence[float]) -> float:
    steps = np.diff(np.asarray(times, np.float64))
    return max(GAP_S, GAP_STEPS * float(np.median(steps))) if len(steps) else GAP_S


def _gaps(times: Sequence[float]) -> list[tuple[float, float]]:
    limit = _gap_limit(times)
    return [(a, b) for a, b in zip(times[:-1], times[1:]) if b - a > limit]


def _size(track: ObjectSightings) -> float:
    """A person's median box height, a thing's median square-root area (pixels)."""
    boxes = np.array([s.box for s in track.sightings], np.float64)
    heights = np.clip(boxes[:, 3] - boxes[:, 1], 0, None)
    if track.is_person:
        return max(float(np.median(heights)), 1.0)
    widths = np.clip(boxes[:, 2] - boxes[:, 0], 0, None)
    return max(float(np.median(np.sqrt(widths * heights))), 1.0)


def _centre(box: Sequence[float]) -> tuple[float, float]:
    return (box[0] + box[2]) / 2, (box[1] + box[3]) / 2


def _together(first: float, second: float) -> float:
    """The smaller of two changes when both go the same way, else 0 (how much moved rigidly)."""
    return min(abs(first), abs(second)) if first * second > 0 else 0.0


def _width(box: Sequence[float]) -> float:
    return max(box[2] - box[0], 1e-3)


def _height(box: Sequence[float]) -> float:
    return max(box[3] - box[1], 1e-3)


def _side(box: Sequence[float]) -> float:
    return math.sqrt(max(box[2] - box[0], 1e-3) * max(box[3] - box[1], 1e-3))


def speeds(track: ObjectSightings, sightings: Sequence[Sighting], camera: Camera = still_camera
           ) -> list[float | None]:
    """Smoothed speed of each interval between consecutive sightings, in object sizes per second
    (None across a gap), against where the camera alone carried the object."""
    size, limit = _size(track), _gap_limit([s.time_s for s in sightings])
    raw: list[float | None] = []
    for a, b in zip(sightings[:-1], sightings[1:]):
        dt = b.time_s - a.time_s
        if dt <= 0 or dt > limit:
            raw.append(None)
            continue
        carried = camera(a.time_s, b.time_s, a.box)
        dx = _together(b.box[0] - carried[0], b.box[2] - carried[2])
        dy = _together(b.box[1] - carried[1], b.box[3] - carried[3])
        growth = _together(math.log(_width(b.box) / _width(carried)), math.log(_height(b.box) / _height(carried)))
        raw.append(math.hypot(dx, dy) / size / dt + growth / dt)
    smooth: list[float | None] = []
    for i, value in enumerate(raw):
        if value is None:
            smooth.append(None)
            continue
        window = [v for v in raw[max(0, i - 1):i + 2] if v is not None]
        smooth.append(float(np.median(window)))
    return smooth


def _runs(track: ObjectSightings, sightings: Sequence[Sighting], camera: Camera
          ) -> list[tuple[float, float, float, float]]:
    """``(start_s, end_s, median speed, seconds still after)`` of each moving run long enough."""
    interval_speeds = speeds(track, sightings, camera)
    times = [s.time_s for s in sightings]
    runs: list[tuple[int, int]] = []  # interval indices [first, last]
    start = None
    for i, speed in enumerate(interval_speeds + [None]):
        moving = speed is not None and speed >= MOVE_SPEED
        if moving and start is None:
            start = i
        elif not moving and start is not None:
            runs.append((start, i - 1))
            start = None
    out = []
    for first, last in runs:
        start_s, end_s = times[first], times[last + 1]
        if end_s - start_s < MIN_MOVE_S:
            continue
        median = float(np.median([interval_speeds[i] for i in range(first, last + 1)]))
        still = last + 1
        while still < len(interval_speeds) and interval_speeds[still] is not None \
                and interval_speeds[still] < MOVE_SPEED:  # type: ignore[operator]
            still += 1
        out.append((start_s, end_s, median, times[still] - end_s))
    return out


def moving_together(tracks: Sequence[ObjectSightings], found: list[Action]) -> list[Action]:
    """``found`` with the carrying and riding its moving things show (and a rider's own walks and runs
    over a ride dropped)."""
    by_id = {track.object_id: track for track in tracks}
    added: list[Action] = []
    for action in found:
        thing = by_id[action.object_id]
        if action.verb != "moves" or thing.is_person:
            continue
        ridden = thing.category in RIDDEN
        carriers = [t for t in tracks if t.object_id != thing.object_id
                    and (t.category in RIDERS if ridden else t.is_person)]
        for carrier in carriers:
            share = _together_share(thing, carrier, action.start_s, action.end_s)
            if share < CARRY_SHARE:
                continue
            passive, active = ("is ridden", "rides") if ridden else ("is carried", "carries")
            sure = round(action.confidence * share, 3)
            added.append(Action(thing.object_id, passive, action.start_s, action.end_s, TRAJECTORY, sure,
                                carrier.object_id))
            added.append(Action(carrier.object_id, active, action.start_s, action.end_s, TRAJECTORY, sure,
                                thing.object_id))
    rides = [a for a in added if a.verb == "rides"]
    kept = [a for a in found if not (a.verb in ("walks", "runs") and any(
        r.object_id == a.object_id and _overlap(a, r) >= 0.5 * max(a.end_s - a.start_s, 1e-6) for r in rides))]
    return kept + added


def _overlap(a: Action, b: Action) -> float:
    return max(0.0, min(a.end_s, b.end_s) - max(a.start_s, b.start_s))


def _together_share(thing: ObjectSightings, carrier: ObjectSightings, start_s: float, end_s: float) -> float:
    """The share of the thing's sightings in ``[start_s, end_s]`` at which it sits in the carrier's
    (grown) box and moves as the carrier does."""
    at = {round(s.time_s, 3): s for s in carrier.sightings}
    mine = [s for s in sorted(thing.sightings, key=lambda s: s.time_s) if start_s - 1e-6 <= s.time_s <= end_s + 1e-6]
    if len(mine) < 2:
        return 0.0
    together = 0
    for i, sighting in enumerate(mine):
        other = at.get(round(sighting.time_s, 3))
        if other is None or not _inside(_centre(sighting.box), other.box):
            continue
        j = i + 1 if i + 1 < len(mine) else i - 1
        other_next = at.get(round(mine[j].time_s, 3))
        if other_next is None:
            continue
        dt = mine[j].time_s - sighting.time_s
        v_thing = np.subtract(_centre(mine[j].box), _centre(sighting.box)) / dt
        v_other = np.subtract(_centre(other_next.box), _centre(other.box)) / dt
        if float(np.linalg.norm(v_thing - v_other)) <= SAME_VELOCITY * float(np.linalg.norm(v_thing)) + 1e-6:
            together += 1
    return together / len(mine)


def _inside(point: tuple[float, float], box: Sequence[float]) -> bool:
    margin = CARRY_MARGIN * _side(box)
    return box[0] - margin <= point[0] <= box[2] + margin and box[1] - margin <= point[1] <= box[3] + margin
