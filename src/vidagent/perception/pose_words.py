"""A body pose in a few words a small planner can use: posture, raised or outstretched arms, hand at face.

Pure geometry on a ``Pose``'s 17 COCO keypoints (image pixels, y down); only keypoints whose
score reaches ``MIN_SCORE`` count. Lengths are measured in torso lengths (shoulder midpoint to hip
midpoint), so the rules hold for near and far people alike; angles are in degrees. The phrases
themselves live in ``pose_words.json`` (keys are the facts this module can tell).

Thresholds were set on 33 people in 29 frames of the test clips (yoga, hitting_baseball,
dog_barking, applausing, example1, the LLaMA-Factory clips, sample_demo_22, mmaction2's demo,
flipping_a_pancake), then checked (and the legs' rules revised) on 20 more people in 14 other
frames of the same clips, with MoveNet lightning keypoints drawn on the frames and looked at;
the comment beside each constant says what was measured. Known confusions: a plank (body
horizontal on straight arms) reads as lying down; a hand on the face is not seen in any clip.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from vidagent.perception.base import Pose

NOSE, LEFT_EYE, RIGHT_EYE, LEFT_EAR, RIGHT_EAR = 0, 1, 2, 3, 4
LEFT_SHOULDER, RIGHT_SHOULDER, LEFT_ELBOW, RIGHT_ELBOW, LEFT_WRIST, RIGHT_WRIST = 5, 6, 7, 8, 9, 10
LEFT_HIP, RIGHT_HIP, LEFT_KNEE, RIGHT_KNEE, LEFT_ANKLE, RIGHT_ANKLE = 11, 12, 13, 14, 15, 16
FACE = (NOSE, LEFT_EYE, RIGHT_EYE, LEFT_EAR, RIGHT_EAR)
#: (shoulder, elbow, wrist) and (hip, knee, ankle) of each side.
ARMS = ((LEFT_SHOULDER, LEFT_ELBOW, LEFT_WRIST), (RIGHT_SHOULDER, RIGHT_ELBOW, RIGHT_WRIST))
LEGS = ((LEFT_HIP, LEFT_KNEE, LEFT_ANKLE), (RIGHT_HIP, RIGHT_KNEE, RIGHT_ANKLE))

#: MoveNet scores of joints one can see on the test frames were 0.4-0.95; joints hidden behind a
#: table, a cymbal or the frame's edge mostly scored 0.05-0.25 and lay anywhere. 0.3 keeps a seen
#: but blurred joint (a batter's wrist on the bat, 0.34-0.40) and drops most guesses.
MIN_SCORE = 0.3
#: Fewer confident keypoints than this (a close-up of hands on a guitar: none above 0.2; a person
#: cut by the frame's edge: 2-4) and nothing is said.
MIN_KEYPOINTS = 6

#: Torso tilt from upright (hip midpoint -> shoulder midpoint against image up), measured: standing
#: 2-11°, sitting 6-7°, a man crouching to his dog 31°, yoga's cobra (lying, chest lifted) 30°,
#: down dog 114°, an arched back 98°.
UPRIGHT_TILT = 25.0
#: Beyond this torso tilt with steep thighs, the person is bending over (down dog: 114°).
BENT_TILT = 55.0
#: Beyond this torso tilt with flat thighs, the person is lying whatever the knees do.
FLAT_TORSO = 60.0
#: Thigh (hip -> knee) and shin (knee -> ankle) tilt from straight down, per leg. Steep thighs
#: measured: standing 0-31°, down dog 36-41°, kneeling 2-8° (and 24/51° for a man on one knee).
#: Flat ones: sitting 55-117° (a drummer's knee above his hip), cobra 74-78°; a lunge's back
#: thigh 43-46° beside a flat front one (not a seat: every thigh seen must be flat to sit or lie).
#: A kneeling shin on the ground 96-105°; standing shins 1-32°; down dog's 50-55° (not flat).
STEEP_THIGH = 42.0
STEEP_SHIN = 35.0
FLAT_THIGH = (50.0, 125.0)
FLAT_SHIN = (60.0, 125.0)
#: A knee this straight (hip-knee-ankle angle) counts as a straight leg (cobra's legs: ~170°).
STRAIGHT_KNEE = 150.0
#: A wrist this many torso lengths above its shoulder is raised (raised arms measured 0.46, a
#: batter's follow-through, to 1.09, yoga; the highest other wrist, a batter's on his bat by the
#: shoulder, 0.15).
RAISED_ABOVE_SHOULDER = 0.3
#: A wrist this close (torso lengths) to the nose, an eye or an ear is at the face. The closest
#: wrist that was not at the face measured 0.24 (a batter's hands by his ear); every other one
#: 0.46 or more. No clip here shows a hand on a face, so the upper side is not measured.
FACE_DISTANCE = 0.2
#: An arm is stretched out when the shoulder-elbow-wrist angle is at least STRAIGHT_ELBOW, the
#: wrist at least OUT_REACH torso lengths from the shoulder, and the shoulder->wrist line within
#: OUT_FROM_HORIZONTAL of horizontal. Stretched arms measured (elbow, reach, off horizontal):
#: (165°, 0.84, 28°) a hand on a door handle, (142-148°, 0.87, 24-28°) a man reaching for his dog,
#: (158°, 1.76, 17°) a baby reaching for her book, (164°, 1.26, 15°) yoga. Other arms: hanging
#: 61-89° off horizontal, reaching down to a handle 53°, bent ones reach 0.15-0.55.
STRAIGHT_ELBOW = 140.0
OUT_REACH = 0.6
OUT_FROM_HORIZONTAL = 40.0

_PHRASES_FILE = Path(__file__).with_name("pose_words.json")


@lru_cache(maxsize=1)
def phrases() -> dict[str, str]:
    """The phrase for each fact (``pose_words.json``)."""
    data = json.loads(_PHRASES_FILE.read_text(encoding="utf-8"))
    return {key: str(value) for key, value in data.items() if not key.startswith("_")}


@dataclass(frozen=True)
class PoseFacts:
    """What the geometry says: a posture key (or None) and the facts about arms and hands."""

    posture: str | None = None  # "standing", "sitting", "kneeling", "lying", "bending" or None
    arms_raised: int = 0
    arms_out: int = 0
    hand_at_face: bool = False

    def keys(self) -> list[str]:
        """The keys of ``pose_words.json`` that describe these facts, posture first."""
        keys = [self.posture] if self.posture else []
        if self.arms_raised:
            keys.append("arms_raised" if self.arms_raised > 1 else "arm_raised")
        if self.arms_out:
            keys.append("arms_out" if self.arms_out > 1 else "arm_out")
        if self.hand_at_face:
            keys.append("hand_at_face")
        return keys


def _seen(kp: np.ndarray, *indices: int) -> bool:
    return all(kp[i, 2] >= MIN_SCORE for i in indices)


def _mean_point(kp: np.ndarray, indices: tuple[int, ...]) -> np.ndarray | None:
    seen = [kp[i, :2] for i in indices if kp[i, 2] >= MIN_SCORE]
    return np.mean(seen, axis=0) if seen else None


def tilt_from_down(vector: np.ndarray) -> float:
    """Angle in degrees between ``vector`` (image pixels, y down) and straight down: 0 down, 90
    horizontal, 180 up."""
    norm = float(np.hypot(vector[0], vector[1]))
    if norm == 0:
        return 0.0
    return math.degrees(math.acos(max(-1.0, min(1.0, float(vector[1]) / norm))))


def _joint_angle(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
    """The angle at ``b`` between ``b->a`` and ``b->c`` in degrees (180 = straight)."""
    u, v = a - b, c - b
    nu, nv = float(np.hypot(*u)), float(np.hypot(*v))
    if nu == 0 or nv == 0:
        return 0.0
    return math.degrees(math.acos(max(-1.0, min(1.0, float(np.dot(u, v)) / (nu * nv)))))


def _tilts(kp: np.ndarray, pairs: list[tuple[int, int]]) -> list[float]:
    return [tilt_from_down(kp[b, :2] - kp[a, :2]) for a, b in pairs if _seen(kp, a, b)]


def _flat(tilt: float | None, bounds: tuple[float, float]) -> bool:
    return tilt is not None and bounds[0] <= tilt <= bounds[1]


def _posture(torso_tilt: float, thighs: list[float], shin: float | None, knee: float | None) -> str | None:
    """Standing, sitting, kneeling, lying, bending over, or None when the legs do not tell.

    ``thighs`` has the tilt of each thigh seen; ``shin`` and ``knee`` are means over the legs seen.
    """
    if not thighs:
        return None  # no knee seen (a table, the frame's edge): the posture would be a guess
    steep_thigh = float(np.mean(thighs)) <= STEEP_THIGH
    if steep_thigh and _flat(shin, FLAT_SHIN):
        return "kneeling"  # thighs down, shins along the ground
    if all(_flat(t, FLAT_THIGH) for t in thighs):  # one flat thigh and one steep one is a lunge, not a seat
        if (shin is None or _flat(shin, FLAT_SHIN)) and (
                torso_tilt >= FLAT_TORSO
                or (torso_tilt > UPRIGHT_TILT and knee is not None and knee >= STRAIGHT_KNEE)):
            return "lying"  # body along the ground, or straight legs along it and the chest lifted
        return "sitting" if torso_tilt <= UPRIGHT_TILT else None  # shins hanging, crossed or out
    if steep_thigh:
        if torso_tilt >= BENT_TILT:
            return "bending"
        if torso_tilt <= UPRIGHT_TILT and (shin is None or shin <= STEEP_SHIN):
            return "standing"
    return None


def pose_facts(pose: Pose) -> PoseFacts | None:
    """The facts ``describe_pose`` words, or None when too few keypoints are confident."""
    kp = np.asarray(pose.keypoints, np.float32).reshape(17, 3)
    if int(np.sum(kp[:, 2] >= MIN_SCORE)) < MIN_KEYPOINTS:
        return None
    shoulders = _mean_point(kp, (LEFT_SHOULDER, RIGHT_SHOULDER))
    if shoulders is None:
        return None
    hips = _mean_point(kp, (LEFT_HIP, RIGHT_HIP))
    posture = None
    if hips is not None:
        torso = float(np.hypot(*(shoulders - hips)))
        torso_tilt = 180.0 - tilt_from_down(shoulders - hips)
        thighs = _tilts(kp, [(hip, knee) for hip, knee, _ in LEGS])
        shins = _tilts(kp, [(knee, ankle) for _, knee, ankle in LEGS])
        knees = [_joint_angle(kp[h, :2], kp[k, :2], kp[a, :2]) for h, k, a in LEGS if _seen(kp, h, k, a)]
        posture = _posture(torso_tilt, thighs, float(np.mean(shins)) if shins else None,
                           float(np.mean(knees)) if knees else None)
    elif _seen(kp, LEFT_SHOULDER, RIGHT_SHOULDER):
        # No hips (a person behind a table): a torso is about 1.5 shoulder widths seen from the front.
        torso = 1.5 * float(np.hypot(*(kp[LEFT_SHOULDER, :2] - kp[RIGHT_SHOULDER, :2])))
    else:
        return PoseFacts()
    if torso < 1e-3:
        return PoseFacts(posture=posture)

    raised = out = 0
    at_face = False
    face = [kp[i, :2] for i in FACE if kp[i, 2] >= MIN_SCORE]
    for shoulder, elbow, wrist in ARMS:
        if not _seen(kp, wrist):
            continue
        w = kp[wrist, :2]
        if face and min(float(np.hypot(*(w - f))) for f in face) <= FACE_DISTANCE * torso:
            at_face = True
            continue
        if not _seen(kp, shoulder):
            continue
        s = kp[shoulder, :2]
        if (s[1] - w[1]) >= RAISED_ABOVE_SHOULDER * torso:
            raised += 1
            continue
        if not _seen(kp, elbow):
            continue
        reach = float(np.hypot(*(w - s))) / torso
        from_horizontal = abs(90.0 - tilt_from_down(w - s))
        if (_joint_angle(s, kp[elbow, :2], w) >= STRAIGHT_ELBOW and reach >= OUT_REACH
                and from_horizontal <= OUT_FROM_HORIZONTAL):
            out += 1
    return PoseFacts(posture=posture, arms_raised=raised, arms_out=out, hand_at_face=at_face)


def describe_pose(pose: Pose) -> str:
    """A few comma-separated words for one person ("standing, arms raised"); empty when the
    keypoints are too unsure to say anything."""
    facts = pose_facts(pose)
    if facts is None:
        return ""
    words = phrases()
    return ", ".join(words[key] for key in facts.keys())
