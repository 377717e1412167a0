"""How the picture moves between sampled frames: a cheap pixel analysis, no model.

The input is a time-ordered run of small greyscale thumbnails. Each interval between two
consecutive thumbnails is compared (``compare``):

* **camera**: corners of the first thumbnail are followed into the second (pyramidal Lucas-Kanade,
  kept only where following them back lands where they started) and a similarity transform (shift,
  zoom, turn) is fitted to them with RANSAC, so things moving in the scene are outliers, not
  camera motion. Shift and zoom are rates per second.
* **moving**: the first thumbnail is warped onto the second with that transform; the share of
  pixels that still differ (after removing a global brightness change) is what moved in the scene.
* **abrupt**: the picture could not be followed and still differs a lot: a scene cut, or a camera
  swinging faster than can be followed.

``find_cuts`` tells the two apart: a cut is one abrupt interval between calm ones (a swinging
camera blurs the intervals around it too). ``describe`` turns the intervals of one stretch of
video (a segment) into words: ``"camera pans right"``, ``"camera shaky (handheld)"``,
``"scene cut at 4.2 s"``, ``"much movement in the centre"``.

Thresholds were measured on the project's test clips (thumbnails ``THUMBNAIL_SIDE`` = 128 px,
intervals of 0.1 s and 0.4 s): see the comments at each.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass
from typing import Sequence

import cv2
import numpy as np

from vidagent.video.pixels import fit_side

log = logging.getLogger(__name__)

THUMBNAIL_SIDE = 128  # pixels on the longer side of the thumbnails compared

# -- thresholds (measured; shifts in frame widths per second) -----------------------------------
MIN_TRACKED_POINTS = 12  # corners a camera transform must be fitted to (and be inliers of)
MIN_INLIER_SHARE = 0.4  # ... and this share of the corners followed
# ... spanning at least this share of the picture (convex hull). Measured: tripod and panning
# shots 0.26-0.86 (2.avi, boat, example1, hitting_baseball); a cup moved before a white wall 0.08-0.16.
MIN_INLIER_HULL = 0.2
# Grey levels (0-255) a pixel must change by after alignment to count as moving: sensor noise and
# compression flicker on still shots (boat.mp4, 2.avi's wok) stay under 15.
MOVING_GREY = 24
# Mean grey difference after alignment. Cuts measured 28-92 (2.avi cook -> wok 92, example1.mp4's
# two cuts 28 and 32); intervals around a cut and steady shots 1-13 (2.avi stirring 3-13, boat 1-2,
# skateboarding_dog following the dog 2-8); a phone swinging around (making_cake) 17-96, with its
# neighbours also above 15, which is what keeps it from being a cut.
ABRUPT_RESIDUAL = 20.0
CALM_RESIDUAL = 15.0
# An abrupt interval is cut-like when the picture's make-up changed too: grey-level histogram
# distance (Bhattacharyya) at least CUT_HISTOGRAM or coarse-layout correlation at most CUT_LAYOUT.
# Cuts: 2.avi 0.48 / -0.01, example1 0.26 / 0.58 and 0.26 / 0.63. Abrupt but no cut (a big object
# moving fast, snow too plain to follow): 0.14 / 0.74-0.81. making_cake's swings: 0.19-0.53 /
# -0.46-0.71, which is why a cut must also stand alone (CUT_ISOLATION_S) and between calm intervals.
CUT_HISTOGRAM = 0.25
CUT_LAYOUT = 0.5
CUT_ISOLATION_S = 1.0
# ... and its neighbours must not swing faster than this (frame widths per second): a phone swung
# past the pool in 0.07 s (test.mp4) had neighbours at 0.23-0.53; around example1's cut 0.14-0.21.
CUT_NEIGHBOUR_RATE = 0.25
# Camera shift rates: a tripod shot (2.avi, boat) measures up to 0.025 over 0.1 s and 0.005 over
# 0.4 s; example1's pan after the dog 0.15-0.31; a hand-held phone following a dog
# (skateboarding_dog) swings +-0.05-0.33 with changing sign, making_cake up to 1.7.
PAN_RATE = 0.06  # median shift (consistent in sign) above which the camera pans or tilts
CONSISTENT_SHARE = 0.6  # share of intervals whose shift has the pan's sign
SHAKE_RATE = 0.12  # spread (RMS about the median) of the shifts above which the camera is shaky
# Zoom (log scale per second): tripod shots measure |z| < 0.05 over 0.4 s; a steady zoom of
# ~10%/s and more, in all intervals alike, is named.
ZOOM_RATE = 0.1
# Share of the aligned picture that changed: still scenes 0-0.01 (boat), a person running far away
# 0.02-0.06 (example1), stirring the wok filling the frame 0.1-0.25 (2.avi).
SOME_MOVING = 0.03
MUCH_MOVING = 0.12
_SPREAD = 1.5  # the busiest grid cell must hold this many times the mean to be named


def motion_thumbnail(image: np.ndarray) -> np.ndarray:
    """A greyscale ``uint8`` copy of an RGB ``uint8`` frame, longer side ``THUMBNAIL_SIDE``."""
    height, width = image.shape[:2]
    size = fit_side(width, height, min(THUMBNAIL_SIDE, max(height, width)), minimum=8)  # never enlarged
    grey = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY)
    return cv2.resize(grey, size, interpolation=cv2.INTER_AREA)


def encode_thumbnail(thumbnail: np.ndarray) -> str:
    """A thumbnail as text (lossless PNG in base64), for JSON checkpoints."""
    ok, data = cv2.imencode(".png", thumbnail)
    if not ok:
        raise ValueError("cannot encode the thumbnail")
    return base64.b64encode(data.tobytes()).decode("ascii")


def decode_thumbnail(text: str) -> np.ndarray:
    """The thumbnail ``encode_thumbnail`` wrote."""
    image = cv2.imdecode(np.frombuffer(base64.b64decode(text), np.uint8), cv2.IMREAD_GRAYSCALE)
    if image is None:
        raise ValueError("not an encoded thumbnail")
    return image


@dataclass(frozen=True)
class PairMotion:
    """What changed from one thumbnail to the next, ``dt`` seconds later.

    ``shift_x``/``shift_y``: how fast the picture content moves (frame widths per second; right and
    down positive: a camera panning right moves the content left); ``zoom``: log scale change per
    second (positive: the content grows, the camera zooms in); ``tracked``: whether the camera
    transform rests on enough followed corners to trust; ``histogram``: Bhattacharyya distance of
    the grey-level histograms (0 same, 1 disjoint); ``residual``: mean absolute grey difference
    left after alignment; ``moving``: share of the aligned picture that changed; ``where``: the
    3x3 grid cell holding most of that change (``"in the centre"``, ``"at the top left"``, ...),
    ``"across the picture"`` when it is spread out, ``""`` when nothing changed; ``abrupt``: not followed and
    still very different (a cut or a swing too fast to follow).
    """

    dt: float
    shift_x: float
    shift_y: float
    zoom: float
    tracked: bool
    histogram: float
    layout: float
    residual: float
    moving: float
    where: str
    abrupt: bool


@dataclass(frozen=True)
class Interval:
    """``PairMotion`` between the thumbnails at ``start_s`` and ``end_s``; ``cut``: a scene cut
    happened in it (see ``find_cuts``)."""

    start_s: float
    end_s: float
    motion: PairMotion
    cut: bool = False

    @property
    def centre_s(self) -> float:
        return (self.start_s + self.end_s) / 2


@dataclass(frozen=True)
class MotionSummary:
    """The words for one stretch of video; each part is ``""``/empty when it has nothing to say."""

    camera: str  # "camera still", "camera pans right, shaky (handheld)", ...
    cut_times: tuple[float, ...]  # seconds, where scene cuts happened (interval centres)
    moving: str  # "much movement in the centre", "some movement across the picture", ""
    phrase: str  # all of it in one line: "camera pans right; scene cut at 4.2 s; much movement ..."


def compare(first: np.ndarray, second: np.ndarray, dt: float) -> PairMotion:
    """The motion from thumbnail ``first`` to thumbnail ``second``, taken ``dt`` seconds later."""
    if first.shape != second.shape:
        raise ValueError(f"thumbnails differ in size: {first.shape} and {second.shape}")
    dt = max(dt, 1e-3)
    height, width = first.shape
    transform, how = _camera_transform(first, second)
    tracked = how == "ok"
    centre = np.array([(width - 1) / 2, (height - 1) / 2, 1.0])
    shift = transform @ centre - centre[:2]
    scale = float(np.sqrt(abs(np.linalg.det(transform[:, :2]))))
    residual, moving, where = _moving(first, second, transform)
    # A picture too plain to follow that hardly changed is a still camera (not where the corners
    # sat on one object only: before a plain background, the camera may follow it).
    still = how == "lost" and residual < CALM_RESIDUAL
    return PairMotion(
        dt=dt,
        shift_x=float(shift[0]) / width / dt,
        shift_y=float(shift[1]) / width / dt,
        zoom=float(np.log(max(scale, 1e-3))) / dt,
        tracked=tracked or still,
        histogram=_histogram_distance(first, second),
        layout=_layout_similarity(first, second),
        residual=residual,
        moving=moving,
        where=where,
        abrupt=not tracked and residual > ABRUPT_RESIDUAL,
    )


def analyse(thumbnails: Sequence[tuple[float, np.ndarray]]) -> list[Interval]:
    """Every interval between consecutive ``(time_s, thumbnail)`` pairs (in time order), with
    its cuts marked. Thumbnails of another size than the first (never in one video) are skipped."""
    if not thumbnails:
        return []
    shape = thumbnails[0][1].shape
    usable = [(t, image) for t, image in thumbnails if image.shape == shape]
    intervals = [Interval(a_t, b_t, compare(a, b, b_t - a_t))
                 for (a_t, a), (b_t, b) in zip(usable, usable[1:])]
    return find_cuts(intervals)


def find_cuts(intervals: Sequence[Interval]) -> list[Interval]:
    """The intervals with ``cut`` set where a scene cut happened: a cut-like interval (``_cut_like``)
    between settled ones (``_settled``), with no other cut-like interval within ``CUT_ISOLATION_S``. A cut is
    instantaneous; a camera swinging around (making_cake) leaves several cut-like intervals close
    together, and unsettled neighbours."""
    like = [_cut_like(interval.motion) for interval in intervals]
    marked = []
    for index, interval in enumerate(intervals):
        neighbours = intervals[max(0, index - 1):index] + intervals[index + 1:index + 2]
        cut = like[index] and all(_settled(n.motion) for n in neighbours) and not any(
            like[other] and abs(intervals[other].centre_s - interval.centre_s) <= CUT_ISOLATION_S
            for other in range(len(intervals)) if other != index)
        marked.append(Interval(interval.start_s, interval.end_s, interval.motion, cut))
    return marked


def _settled(motion: PairMotion) -> bool:
    """Calm (little left after alignment) and not swinging fast."""
    return motion.residual < CALM_RESIDUAL and float(np.hypot(motion.shift_x, motion.shift_y)) < CUT_NEIGHBOUR_RATE


def _cut_like(motion: PairMotion) -> bool:
    """Abrupt and a different picture: its grey levels or its coarse layout changed."""
    return motion.abrupt and (motion.histogram >= CUT_HISTOGRAM or motion.layout <= CUT_LAYOUT)


def describe(intervals: Sequence[Interval]) -> MotionSummary:
    """Words for the intervals of one stretch of video (e.g. one segment)."""
    cuts = tuple(round(i.centre_s, 1) for i in intervals if i.cut)
    steady = [i.motion for i in intervals if not i.cut]
    camera = _camera_words(steady)
    moving = _moving_words(steady)
    parts = [camera]
    if cuts:
        parts.append(("scene cut at " if len(cuts) == 1 else "scene cuts at ") + ", ".join(f"{t:.1f} s" for t in cuts))
    parts.append(moving)
    return MotionSummary(camera, cuts, moving, "; ".join(part for part in parts if part))


# -- pieces ----------------------------------------------------------------------------------
def _camera_words(motions: Sequence[PairMotion]) -> str:
    if not motions:
        return ""
    tracked = [m for m in motions if m.tracked]
    lost = len(motions) - len(tracked)
    if not tracked or lost * 2 > len(motions):
        # Not followed in most intervals: swinging too fast (tracked ones are calm: a cut's frames).
        swinging = sum(1 for m in motions if not m.tracked and m.residual >= CALM_RESIDUAL)
        return "camera shaky (handheld)" if swinging * 2 >= len(motions) else ""
    xs = np.array([m.shift_x for m in tracked])
    ys = np.array([m.shift_y for m in tracked])
    zooms = np.array([m.zoom for m in tracked])
    moves: list[str] = []
    pan = _steady_rate(xs)
    if pan:
        moves.append("camera pans " + ("left" if pan > 0 else "right"))  # content moves the other way
    tilt = _steady_rate(ys)
    if tilt:
        moves.append(("camera tilts " if not moves else "tilts ") + ("up" if tilt > 0 else "down"))
    zoom = float(np.median(zooms))
    if abs(zoom) > ZOOM_RATE and np.all(np.sign(zooms) == np.sign(zoom)):
        moves.append(("camera zooms " if not moves else "zooms ") + ("in" if zoom > 0 else "out"))
    spread = float(np.sqrt(np.mean((xs - np.median(xs)) ** 2 + (ys - np.median(ys)) ** 2)))
    shaky = spread > SHAKE_RATE or lost * 4 >= len(motions) and spread > SHAKE_RATE / 2
    if shaky:
        moves.append("shaky (handheld)" if moves else "camera shaky (handheld)")
    return ", ".join(moves) if moves else "camera still"


def _steady_rate(rates: np.ndarray) -> float:
    """The median of ``rates`` when it is large and most rates share its sign, else 0."""
    median = float(np.median(rates))
    if abs(median) <= PAN_RATE:
        return 0.0
    agreeing = float(np.mean(np.sign(rates) == np.sign(median)))
    return median if agreeing >= CONSISTENT_SHARE else 0.0


def _moving_words(motions: Sequence[PairMotion]) -> str:
    followed = [m for m in motions if m.tracked]
    if not followed:
        return ""
    share = float(np.median([m.moving for m in followed]))
    if share < SOME_MOVING:
        return ""
    places = [m.where for m in followed if m.where]
    place = max(places, key=places.count) if places else ""  # ties: the first seen
    amount = "much movement" if share >= MUCH_MOVING else "some movement"
    return f"{amount} {place}".strip()


def _layout_similarity(first: np.ndarray, second: np.ndarray) -> float:
    """Correlation (-1..1) of the two pictures' coarse layouts: mean grey levels on an 8x8 grid."""
    cells = [cv2.resize(image, (8, 8), interpolation=cv2.INTER_AREA).astype(np.float32).ravel()
             for image in (first, second)]
    a, b = (cell - cell.mean() for cell in cells)
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norm if norm > 1e-6 else 1.0


def _histogram_distance(first: np.ndarray, second: np.ndarray) -> float:
    hists = [cv2.calcHist([image], [0], None, [32], [0, 256]) for image in (first, second)]
    for hist in hists:
        cv2.normalize(hist, hist, 1.0, 0.0, cv2.NORM_L1)
    return float(cv2.compareHist(hists[0], hists[1], cv2.HISTCMP_BHATTACHARYYA))


def _camera_transform(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, str]:
    """A 2x3 similarity transform taking ``first`` onto ``second``, and how it was found: ``"ok"``;
    ``"concentrated"`` (the corners it rests on cover too little of the picture: they may belong
    to one object before a plain background, as a cup before a white wall); ``"lost"`` (too few
    corners found or followed). Not ``"ok"``: the identity."""
    identity = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    corners = _corners(first)
    if len(corners) < MIN_TRACKED_POINTS:
        return identity, "lost"
    criteria = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 30, 0.01)
    lk = {"winSize": (15, 15), "maxLevel": 3, "criteria": criteria}
    forward, status, _ = cv2.calcOpticalFlowPyrLK(first, second, corners, None, **lk)
    back, status_back, _ = cv2.calcOpticalFlowPyrLK(second, first, forward, None, **lk)
    good = (status.ravel() == 1) & (status_back.ravel() == 1) & \
        (np.linalg.norm((back - corners).reshape(-1, 2), axis=1) < 1.0)
    if int(good.sum()) < MIN_TRACKED_POINTS:
        return identity, "lost"
    source, target = corners[good].reshape(-1, 2), forward[good].reshape(-1, 2)
    transform, inliers = cv2.estimateAffinePartial2D(source, target, method=cv2.RANSAC, ransacReprojThreshold=1.0,
                                                     maxIters=500, confidence=0.99, refineIters=10)
    if transform is None or inliers is None:
        return identity, "lost"
    kept = source[inliers.ravel() == 1].astype(np.float32)
    if len(kept) < max(MIN_TRACKED_POINTS, MIN_INLIER_SHARE * len(source)):
        return identity, "lost"
    if cv2.contourArea(cv2.convexHull(kept)) < MIN_INLIER_HULL * first.size:
        return identity, "concentrated"
    return transform, "ok"


def _corners(image: np.ndarray) -> np.ndarray:
    """Corners to follow, found in each cell of a 3x3 grid on its own (so faint texture in one part
    of the picture is not drowned by strong corners elsewhere); shape (n, 1, 2), float32."""
    height, width = image.shape
    found = []
    for rows in np.array_split(np.arange(height), 3):
        for cols in np.array_split(np.arange(width), 3):
            cell = image[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1]
            points = cv2.goodFeaturesToTrack(cell, maxCorners=30, qualityLevel=0.05, minDistance=4, blockSize=5)
            if points is not None:
                found.append(points + np.array([cols[0], rows[0]], np.float32))
    return np.concatenate(found).astype(np.float32) if found else np.zeros((0, 1, 2), np.float32)


def _moving(first: np.ndarray, second: np.ndarray, transform: np.ndarray) -> tuple[float, float, str]:
    """(mean absolute difference after alignment, share of pixels that moved, where most did)."""
    height, width = first.shape
    warped = cv2.warpAffine(first, transform, (width, height), flags=cv2.INTER_LINEAR,
                            borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    valid = cv2.warpAffine(np.full_like(first, 255), transform, (width, height), flags=cv2.INTER_NEAREST,
                           borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    valid = cv2.erode(valid, np.ones((3, 3), np.uint8)) > 0
    if int(valid.sum()) < valid.size // 4:  # aligned frames hardly overlap
        diff = np.abs(second.astype(np.float32) - first.astype(np.float32))
        return float(diff.mean()), 1.0, "across the picture"
    diff = cv2.GaussianBlur(second, (5, 5), 0).astype(np.float32) - cv2.GaussianBlur(warped, (5, 5), 0)
    diff = np.abs(diff - float(np.median(diff[valid])))  # a change of exposure or light is not movement
    residual = float(diff[valid].mean())
    mask = ((diff > MOVING_GREY) & valid).astype(np.uint8)
    mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))  # edges off by a pixel
    share = float(mask.sum()) / float(valid.sum())
    return residual, share, _busiest_cell(mask.astype(bool), valid) if mask.any() else ""


def _busiest_cell(mask: np.ndarray, valid: np.ndarray) -> str:
    """Where the 3x3 grid cell with the largest moving share lies (``"in the centre"``, ``"at the
    top left"``, ...), or ``"across the picture"`` when no cell stands out."""
    height, width = mask.shape
    rows = np.array_split(np.arange(height), 3)
    cols = np.array_split(np.arange(width), 3)
    shares = np.zeros((3, 3))
    for r, row in enumerate(rows):
        for c, col in enumerate(cols):
            cell = valid[row[0]:row[-1] + 1, col[0]:col[-1] + 1]
            if cell.any():
                shares[r, c] = mask[row[0]:row[-1] + 1, col[0]:col[-1] + 1][cell].mean()
    r, c = np.unravel_index(int(np.argmax(shares)), shares.shape)
    if shares[r, c] < _SPREAD * shares.mean():
        return "across the picture"
    return _PLACES[r][c]


_PLACES = (("at the top left", "at the top", "at the top right"),
           ("on the left", "in the centre", "on the right"),
           ("at the bottom left", "at the bottom", "at the bottom right"))
