"""A generated clip of moving coloured shapes for referring-object tests (``refer_object``), indexed with the
scripted perception: three cups along the top (the red and blue move right, the green down), a small black
dog running right along the bottom, a large white dog standing still and a yellow person on the right who
sits down at 2 s (an actions row, as the actions stage writes them). Eight scenes of half a second, 320x240
at 10 frames a second: the objects stage samples every scene once."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from vidagent.memory.store import Library
from vidagent.video.video import Video

from fakes.library import build_home, fake_settings
from fakes.perception import FakeClip, Scene, SceneObject

RED, BLUE, GREEN = (220, 30, 30), (30, 60, 220), (30, 180, 40)
BLACK, WHITE, YELLOW = (15, 15, 15), (245, 245, 245), (235, 210, 20)
SIZE = (320, 240)
SCENES = 8
RED_CUP, BLUE_CUP, GREEN_CUP, BLACK_DOG, WHITE_DOG, PERSON = range(6)  # the object ids, in the order drawn


def shapes(index: int) -> tuple[SceneObject, ...]:
    """The objects of scene ``index``, in object-id order."""
    dx = 0.02 * index
    return (SceneObject("cup", (0.05 + dx, 0.1, 0.2 + dx, 0.3), colour=RED),
            SceneObject("cup", (0.4 + dx, 0.1, 0.55 + dx, 0.3), colour=BLUE),
            SceneObject("cup", (0.75, 0.05 + dx, 0.88, 0.25 + dx), colour=GREEN),
            SceneObject("dog", (0.05 + 2 * dx, 0.6, 0.25 + 2 * dx, 0.85), colour=BLACK),
            SceneObject("dog", (0.45, 0.45, 0.8, 0.95), colour=WHITE),
            SceneObject("person", (0.88, 0.35, 0.97, 0.95), colour=YELLOW))


def shapes_clip() -> FakeClip:
    return FakeClip("shapes", [Scene("cups, dogs and a person", seconds=0.5, objects=shapes(i)) for i in range(SCENES)],
                    size=SIZE)


def build_shapes_home(home: Path, folder: Path | None = None) -> tuple[Path, FakeClip]:
    """Write the clip (into ``folder``, default ``<home>/videos``), build its object memory into ``home``'s
    library and add the actions rows; the clip's file and script."""
    clip = shapes_clip()
    path = build_home(home, [clip], ["objects"], folder=folder)["shapes"]
    with Library(fake_settings(home).library_path) as library:
        video_id = Video(path).content_hash
        built = library.rows("SELECT config FROM stages WHERE video_id=? AND stage='actions'", (video_id,))
        config = json.loads(built[0][0]) if built else {"written by": "a test"}  # the stage's own: not rebuilt
        library.write_stage(video_id, "actions", config, {"actions": [
            (0, PERSON, "sits down", 2.0, 2.0, "pose", 0.9, None), (1, BLACK_DOG, "runs", 0.0, 3.5, "trajectory", 0.8, None),
            (2, BLACK_DOG, "carries", 0.5, 1.5, "trajectory", 0.6, RED_CUP)]}, 0.01)
    return path, clip


def truth(clip: FakeClip, object_index: int, time_s: float) -> np.ndarray:
    """Where object ``object_index`` is drawn in the frame shown at ``time_s``, as a bool mask."""
    width, height = clip.size
    scene = clip.scenes[clip.scene_index_at(time_s)]
    x1, y1, x2, y2 = scene.objects[object_index].box
    mask = np.zeros((height, width), bool)
    mask[int(y1 * height):int(y2 * height), int(x1 * width):int(x2 * width)] = True
    return mask
