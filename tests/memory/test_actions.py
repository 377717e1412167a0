"""Actions per object (issue 25, item 2): verbs with time spans from trajectories and poses, found by the
``actions`` stage on a generated clip whose shapes move as its script says, with the scripted perception."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fakes import FakeClip, Scene, SceneObject, fake_settings, library_from_rows
from vidagent.memory.actions import Action, ObjectSightings, Sighting, actions_text
from vidagent.memory.builder import OBJECT_STAGES
from vidagent.memory.pose_actions import pose_actions, pose_keys
from vidagent.memory.stages.actions import object_actions
from vidagent.memory.store import Library
from vidagent.memory.trajectory_actions import trajectory_actions

STEP_S = 0.5  # one scene per object sample (the objects stage samples 2 frames a second)


def _shapes_clip() -> FakeClip:
    """6 s: a red car drives right and stops at 3 s; a dog runs left out of the picture (last seen at
    3.5 s); from 1 s a person walks in from the right carrying a bag."""
    scenes = []
    for i in range(12):
        t = i * STEP_S
        car_x = 0.05 + 0.4 * min(t, 3.0) / 3.0
        objects = [SceneObject("car", (car_x, 0.05, car_x + 0.2, 0.2), colour=(200, 30, 30))]
        if t <= 3.5:
            dog_x = 0.6 - 0.08 * i
            objects.append(SceneObject("dog", (dog_x, 0.28, dog_x + 0.15, 0.43), colour=(240, 240, 240)))
        if t >= 1.0:
            person_x = 0.8 - 0.07 * (i - 2)
            objects.append(SceneObject("person", (person_x, 0.5, person_x + 0.12, 0.9), colour=(30, 30, 200)))
            objects.append(SceneObject("handbag", (person_x + 0.03, 0.72, person_x + 0.09, 0.82), colour=(30, 200, 30)))
        scenes.append(Scene(f"shapes at {t:.1f} s", STEP_S, tuple(objects)))
    return FakeClip("action_shapes", scenes, size=(160, 120))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    home = tmp_path_factory.mktemp("actions")
    clip = _shapes_clip()
    videos = library_from_rows(home / "library.sqlite", [clip], ["objects"],
                               settings=fake_settings(home, library=home / "library.sqlite"))
    library = Library(home / "library.sqlite")
    yield library, videos[clip.name].content_hash
    library.close()


def _verbs(library: Library, video_id: str) -> dict[str, list[tuple]]:
    """Category -> its actions as (verb, start_s, end_s, other's category or None), in time order."""
    categories = dict(library.rows("SELECT object_id, category FROM objects WHERE video_id=?", (video_id,)))
    out: dict[str, list[tuple]] = {}
    for object_id, verb, start_s, end_s, other in library.rows(
            "SELECT object_id, verb, start_s, end_s, other_id FROM actions WHERE video_id=? ORDER BY action_id",
            (video_id,)):
        out.setdefault(categories[object_id], []).append((verb, start_s, end_s, categories.get(other)))
    return out


def test_the_objects_memory_builds_actions_and_descriptions_with_it(built):
    library, video_id = built
    assert set(OBJECT_STAGES) <= set(library.stage_names(video_id))
    assert library.count_rows("object_descriptions", video_id) == library.count_rows("objects", video_id) == 4


def test_the_car_moves_then_stops_and_the_dog_leaves(built):
    verbs = _verbs(*built)
    assert verbs["car"] == [("moves", 0.0, 3.0, None), ("stops", 3.0, 3.0, None)]
    assert verbs["dog"] == [("moves", 0.0, 3.5, None), ("disappears", 3.5, 3.5, None)]


def test_the_person_enters_walking_and_carries_the_bag(built):
    verbs = _verbs(*built)
    assert verbs["person"] == [("enters", 1.0, 1.0, None), ("carries", 1.0, 5.5, "handbag"), ("walks", 1.0, 5.5, None)]
    assert verbs["handbag"] == [("appears", 1.0, 1.0, None), ("is carried", 1.0, 5.5, "person"),
                                ("moves", 1.0, 5.5, None)]


def test_each_object_line_says_what_it_looks_like_and_does(built):
    library, video_id = built
    lines = dict(library.rows(
        """SELECT o.category, d.line FROM object_descriptions d JOIN objects o USING (video_id, object_id)
           WHERE d.video_id=?""", (video_id,)))
    assert lines["car"].startswith("red car") and lines["car"].endswith("moves 0.0-3.0 s, stops at 3.0 s")
    assert "is carried object" in lines["handbag"] and "disappears at 3.5 s" in lines["dog"]
    stored = library.rows("SELECT caption, embedding FROM object_descriptions WHERE video_id=?", (video_id,))
    assert all(caption is None and len(vector) == 4 * 256 for caption, vector in stored)  # no captioner here


# -- the derivation alone ------------------------------------------------------------------------------

def _track(object_id: int, category: str, boxes: list[tuple[float, float, float, float]], start_s: float = 0.0):
    return ObjectSightings(object_id, category, tuple(Sighting(start_s + i * STEP_S, box) for i, box in enumerate(boxes)))


def test_a_runner_runs_and_a_jittering_thing_does_nothing():
    runner = _track(0, "person", [(10 + 120 * i, 100, 40 + 120 * i, 200) for i in range(8)])  # 2.4 heights/s
    cup = _track(1, "cup", [(100 + (i % 2), 50, 120 + (i % 2), 70 - (i % 3)) for i in range(8)])
    actions = object_actions([runner, cup], {}, duration_s=3.8)
    assert [(a.object_id, a.verb) for a in actions] == [(0, "runs")]


def test_a_ride_replaces_the_riders_walk():
    rider = _track(0, "person", [(20 * i, 40, 20 * i + 30, 120) for i in range(6)])
    bike = _track(1, "bicycle", [(20 * i - 5, 80, 20 * i + 35, 125) for i in range(6)])
    verbs = {(a.object_id, a.verb, a.other_id) for a in object_actions([rider, bike], {}, duration_s=2.8)}
    assert verbs == {(0, "rides", 1), (1, "is ridden", 0), (1, "moves", None)}


def test_a_gap_is_a_disappearance_and_a_return():
    thing = ObjectSightings(3, "ball", tuple(Sighting(t, (10, 10, 20, 20)) for t in (0.0, 0.5, 1.0, 4.0, 4.5, 5.0)))
    found = [(a.verb, a.start_s, a.confidence) for a in trajectory_actions(thing, duration_s=5.0)]
    assert found == [("disappears", 1.0, 0.6), ("appears", 4.0, 0.6)]


def test_poses_over_frames_become_postures_changes_and_arms():
    samples = [(0.0, pose_keys("standing")), (2.0, pose_keys("standing, one arm raised")),
               (4.0, pose_keys("sitting")), (6.0, pose_keys("sitting")), (8.0, pose_keys("lying down")),
               (20.0, pose_keys("standing"))]  # 12 s later: no change is read across the gap
    found = {(a.verb, a.start_s, a.end_s) for a in pose_actions(5, samples)}
    assert found == {("stands", 0.0, 2.0), ("raises an arm", 2.0, 2.0), ("sits down", 2.0, 4.0), ("sits", 4.0, 6.0),
                     ("lies down", 6.0, 8.0), ("lies", 8.0, 8.0), ("stands", 20.0, 20.0)}
    assert pose_keys("arms raised, hand at face") == {"arms_raised", "hand_at_face"} and pose_keys("juggling") == set()


def test_actions_read_as_words():
    actions = [Action(1, "walks", 0.0, 3.5, "trajectory", 0.9), Action(1, "carries", 1.0, 3.0, "trajectory", 0.7, 4),
               Action(1, "sits down", 4.0, 4.0, "pose", 0.7)]
    assert actions_text(actions) == "walks 0.0-3.5 s, carries object 4 1.0-3.0 s, sits down at 4.0 s"
    assert Action(1, "stops", 2.0, 2.0, "trajectory", 0.8123).row(7) == (7, 1, "stops", 2.0, 2.0, "trajectory", 0.812,
                                                                          None)


def test_no_objects_no_actions():
    assert object_actions([], {}, duration_s=5.0) == []


def test_the_video_classifier_setting_leaves_earlier_runs_identities_alone():
    from vidagent.config import BackendSettings, Settings

    plain = Settings()
    assert "video_classifier" not in plain.answer_settings()["backends"]  # as before the setting existed
    classified = replace(plain, backends=BackendSettings(video_classifier="hf"))
    assert classified.answer_settings()["backends"]["video_classifier"] == "hf"


class _CropCaptioner:
    """A captioner that says what colour the crop it is given mostly is (a test double of a captioning model)."""

    name = "crop-colour-captioner"
    label = ""
    memory_note = "captions of crops"

    def describe(self, images):
        from vidagent.perception.base import FrameDescription

        said = []
        for image in images:
            r, g, b = (float(v) for v in image.reshape(-1, 3).mean(axis=0))
            colour = max((r, "a reddish thing"), (g, "a greenish thing"), (b, "a bluish thing"))[1]
            said.append(FrameDescription(caption=colour, size=(image.shape[1], image.shape[0])))
        return said


def test_a_configured_captioner_captions_each_objects_best_crop(tmp_path):
    from fakes import scripted_perception

    clip = _shapes_clip()
    perception = replace(scripted_perception(clip), captioner=_CropCaptioner())
    video = library_from_rows(tmp_path / "library.sqlite", [clip], ["objects"], perception=perception,
                              settings=fake_settings(tmp_path, library=tmp_path / "library.sqlite"))[clip.name]
    with Library(tmp_path / "library.sqlite") as library:
        captions = dict(library.rows(
            """SELECT o.category, d.caption FROM object_descriptions d JOIN objects o USING (video_id, object_id)
               WHERE d.video_id=?""", (video.content_hash,)))
        best = dict(library.rows("""SELECT o.category, d.best_s FROM object_descriptions d
                                    JOIN objects o USING (video_id, object_id) WHERE d.video_id=?""",
                                 (video.content_hash,)))
    assert captions["car"] == "a reddish thing" and captions["person"] == "a bluish thing"
    assert 1.0 <= best["person"] <= 5.5 and best["dog"] <= 3.5  # a sighting of its own


def test_a_pan_does_not_move_still_things_and_a_walker_is_measured_against_it():
    from vidagent.memory.camera_motion import CameraPath, CameraStep

    # the picture's content moves left a quarter of the frame a second
    panning = CameraStep(dt=STEP_S, shift_x=-0.25, shift_y=0.0, zoom=0.0, followed=True)
    times = tuple(i * STEP_S for i in range(8))
    camera = CameraPath(times, tuple(panning for _ in times[1:]), width=400, height=300)
    post = _track(0, "person", [(300 - 50 * i, 100, 330 - 50 * i, 200) for i in range(8)])  # carried left by the pan
    walker = _track(1, "person", [(100, 100, 130, 200) for _ in range(8)])  # followed by the camera: still in the picture
    verbs = {(a.object_id, a.verb) for a in object_actions([post, walker], {}, duration_s=3.8, camera=camera)}
    assert verbs == {(1, "walks")}
    assert {(a.object_id, a.verb) for a in object_actions([post, walker], {}, duration_s=3.8)} == {(0, "walks")}
    lost = CameraPath(times, tuple(replace(panning, followed=False) for _ in times[1:]), 400, 300)
    assert lost(0.0, 0.5, (1.0, 2.0, 3.0, 4.0)) == (1.0, 2.0, 3.0, 4.0)  # not followed: as a still camera
    assert camera(0.0, 1.0, (200.0, 100.0, 230.0, 200.0)) == pytest.approx((100.0, 100.0, 130.0, 200.0))


def test_the_camera_stage_measures_a_pan_in_the_objects_decoding_pass_and_the_actions_read_it(tmp_path):
    """A picture slid left 40 pixels between sample times: the camera stage, sampled at the objects' times, stores one
    followed interval per pair of sample times with the content moving left, and the stored path carries a box
    left by as much."""
    import numpy as np


    from vidagent.memory.camera_motion import stored_camera_path
    from vidagent.memory.stages.camera import CameraStage
    from vidagent.video.video import SampledFrame

    rng = np.random.default_rng(0)
    scene = (rng.random((30, 150)) * 255).astype(np.uint8)
    scene = np.repeat(np.repeat(scene, 8, axis=0), 8, axis=1)  # blocks of 8 px: corners to follow
    times = [0.0, 0.5, 1.0, 1.5]
    frames = [SampledFrame(t, np.stack([scene[:, int(t * 80): int(t * 80) + 320]] * 3, axis=-1)) for t in times]
    stage = CameraStage(lambda video: times, {"fps": 2.0})
    clip = _shapes_clip()
    video = library_from_rows(tmp_path / "library.sqlite", [clip], ["objects"])[clip.name]
    rows = stage.finish(video, None, dict(zip(times, stage.process(frames))))["camera_path"]  # type: ignore[arg-type]
    assert [row[:2] for row in rows] == [(0.0, 0.5), (0.5, 1.0), (1.0, 1.5)]
    assert all(row[5] == 1 and row[2] < 0 for row in rows)  # followed; the content moves left
    with Library(tmp_path / "library.sqlite") as library:
        built = library.rows("SELECT COUNT(*) FROM camera_path WHERE video_id=?", (video.content_hash,))[0][0]
        assert built > 0  # the object memory built its camera path at the objects' sample times
        library.write_stage(video.content_hash, "camera", stage.config(), {"camera_path": rows}, 0.1)
        path = stored_camera_path(library, video.content_hash, 320, 240)
    assert path is not None and path.times == (0.0, 0.5, 1.0, 1.5)
    x1, _, x2, _ = path(0.0, 1.5, (200.0, 50.0, 240.0, 90.0))
    assert x1 == pytest.approx(200.0 - 120.0, abs=6.0) and x2 - x1 == pytest.approx(40.0, abs=2.0)


def test_a_line_names_the_surest_actions_of_many():
    from vidagent.memory.object_lines import MAX_LINE_ACTIONS, object_line

    many = [Action(2, "walks" if i % 2 else "stops", float(i), float(i), "trajectory", 0.9 if i % 3 == 0 else 0.5)
            for i in range(20)]
    line = object_line("blue person, large", "", "", many)
    # the 7 surest (every third), then the first of the rest, in time order
    assert line.startswith("blue person, large; stops at 0.0 s, walks at 1.0 s, walks at 3.0 s, stops at 6.0 s")
    assert line.endswith(f"(and {20 - MAX_LINE_ACTIONS} more)") and line.count(" at ") == MAX_LINE_ACTIONS
