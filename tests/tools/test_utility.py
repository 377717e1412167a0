"""DoraemonGPT's utility tools (issue 24): an object placed in every frame from its sampled boxes (pure),
the pixel work on clips made here with PyAV (cut, drawn on, painted out, frames), and the tools over
the real object memory of a real clip built with the real offline perception, each output decoded back
with PyAV and checked. The commands, routes and page are in test_utility_faces.py."""

from __future__ import annotations

import threading
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
import supervision as sv

from vidagent.config import Settings
from vidagent.errors import OutputError, VideoError
from vidagent.memory.builder import MemoryBuilder
from vidagent.memory.store import Library
from vidagent.memory.stored_video import StoredVideo
from vidagent.memory.video_memory import VideoMemory
from vidagent.tools.edits import EditTooLong, VideoEdits, object_track
from vidagent.tools.media import ImageMedia, VideoMedia
from vidagent.tools.utility import UtilityTools
from vidagent.video import editing
from vidagent.video.track import Placement, Track, TrackBox, decode_mask_or_none, region
from vidagent.video.video import Video

from conftest import video_path, write_test_video

BOAT = "github_Video-LLaMA/boat.mp4"  # 6 s, 592x336, AAC sound: one tour boat, detected throughout
RED = (230, 30, 30)


def decoded(path: Path) -> list[av.VideoFrame]:
    with av.open(str(path)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


def stream_facts(path: Path) -> dict:
    with av.open(str(path)) as container:
        video = container.streams.video[0]
        audio = container.streams.audio[0] if container.streams.audio else None
        samples = sum(frame.samples for frame in container.decode(audio)) if audio else 0
        return {"frames": video.frames, "duration_s": float(video.duration * video.time_base),
                "width": video.width, "height": video.height,
                "audio_s": samples / audio.rate if audio else None, "audio_channels": audio.channels if audio else 0}


def grown_union(track: Track, times: list[float], width: int, height: int, pixels: int) -> np.ndarray:
    """Where the object was at any of ``times``, every box grown by ``pixels`` (its box, not its mask: what is
    drawn around it)."""
    out = np.zeros((height, width), bool)
    for t in times:
        placed = track.place(t, width, height)
        if placed is not None:
            out |= region(Placement(placed.box), width, height, fraction=0.0, pixels=pixels)
    return out


# -- an object in every frame -----------------------------------------------------------------------------------------------
def test_a_track_holds_each_sample_half_a_step_moves_between_near_samples_and_leaves_gaps():
    track = Track([TrackBox(1.0, (0, 0, 10, 10)), TrackBox(1.5, (10, 0, 20, 10)), TrackBox(4.0, (50, 50, 60, 60)),
                   TrackBox(4.0, (70, 50, 80, 60))], step_s=0.5)
    assert track.box_at(1.25) == pytest.approx((5, 0, 15, 10))  # half-way between two samples a step apart
    assert track.box_at(0.5) == pytest.approx((-10, 0, 0, 10)) and track.box_at(0.45) is None  # on a step before
    assert track.box_at(2.0) == pytest.approx((20, 0, 30, 10)) and track.box_at(2.5) is None  # a gap, not a move
    assert track.box_at(3.5) == track.box_at(4.0) == (50, 50, 80, 60)  # two boxes at one time: one around both
    assert (track.first_s, track.last_s) == (0.5, 4.5) and len(track) == 3
    with pytest.raises(ValueError):
        Track([], step_s=0)


def test_a_mask_is_used_at_its_sample_moved_with_the_box_between_samples_and_dilated():
    mask = np.zeros((40, 60), bool)
    mask[10:20, 10:15] = True
    rle = sv.mask_to_rle(mask, compressed=True)
    track = Track([TrackBox(0.0, (10, 10, 15, 20), rle), TrackBox(0.5, (20, 10, 25, 20))], step_s=0.5)
    at_sample = track.place(0.0, 60, 40)
    assert np.array_equal(at_sample.mask, mask)
    moved = track.place(0.2, 60, 40)  # nearer the first sample: its mask, moved 4 px right with the box
    assert moved.box == pytest.approx((14, 10, 19, 20)) and moved.mask[10:20, 14:19].all() and moved.mask.sum() == 50
    grown = region(at_sample, 60, 40, fraction=0.1, pixels=2)
    assert grown[mask].all() and grown.sum() > mask.sum() and not grown[:, 30:].any()  # dilated, not the box
    assert decode_mask_or_none(rle, 61, 40) is None and decode_mask_or_none("[1, 2", 60, 40) is None  # wrong size, not a mask
    assert np.array_equal(decode_mask_or_none(str([int(v) for v in sv.mask_to_rle(mask)]), 60, 40), mask)
    boxed = region(Placement((10, 10, 20, 20)), 60, 40, fraction=0.1, pixels=2)
    assert boxed.sum() == 16 * 16 and boxed[7:23, 7:23].all()


def test_inpainting_fills_the_covered_pixels_and_changes_no_other():
    y, x = np.mgrid[0:120, 0:160]
    image = np.stack([x * 1.5, y * 2, (x + y) % 256], axis=-1).astype(np.uint8)
    image[40:80, 60:100] = RED
    covered = np.zeros((120, 160), bool)
    covered[36:84, 56:104] = True
    out = editing.inpaint(image, covered)
    assert np.array_equal(out[~covered], image[~covered])
    assert not _red(out).any() and _red(image).sum() == 1600
    assert editing.inpaint(image, np.zeros_like(covered)) is image


def test_frame_times_cover_the_window_at_the_rate():
    assert editing.frame_times(1.0, 3.0, 2) == [1.0, 1.5, 2.0, 2.5]
    assert editing.frame_times(2.0, 2.0, 1) == [2.0] and editing.frame_times(0, 0.4, 1) == [0.0]


# -- the pixel work, on a clip made here ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def moving_square(tmp_path_factory) -> tuple[Video, Track]:
    """3 s at 10 fps, 320x240, with a tone: a red 30 px square moving right 30 px a second over a smooth
    background; its track sampled twice a second, as the objects stage samples."""
    y, x = np.mgrid[0:240, 0:320]
    background = np.stack([60 + x * 0.4, 80 + y * 0.5, 140 + 40 * np.sin(x / 25.0)], axis=-1).astype(np.uint8)
    frames = []
    for i in range(30):
        image = background.copy()
        left = 40 + 3 * i
        image[100:130, left:left + 30] = RED
        frames.append(image)
    path = write_test_video(tmp_path_factory.mktemp("square") / "square.mp4", frames, fps=10, audio=True)
    track = Track([TrackBox(t, (40 + 30 * t, 100, 70 + 30 * t, 130)) for t in np.arange(0, 3, 0.5)], step_s=0.5)
    return Video(path), track


def test_a_clip_keeps_its_window_frame_rate_and_sound(moving_square, tmp_path):
    video, _ = moving_square
    out = editing.export_clip(video, 1.0, 2.5, tmp_path / "clip.mp4")
    facts = stream_facts(out)
    assert facts["frames"] == 15 and len(decoded(out)) == 15
    assert facts["duration_s"] == pytest.approx(1.5, abs=0.01) and (facts["width"], facts["height"]) == (320, 240)
    assert facts["audio_s"] == pytest.approx(1.5, abs=0.1) and facts["audio_channels"] == 2  # as the source
    assert [p.name for p in tmp_path.iterdir()] == ["clip.mp4"]  # no temporary file left
    first = decoded(out)[0]
    assert _red(first)[100:130, 70:100].mean() > 0.9  # the frame at 1.0 s: the square at x 70-100
    for start, end, why in ((3.5, 4, "after the video ends"), (2, 1, "must end after it starts"), (-1, 1, "from 0")):
        with pytest.raises(VideoError, match=why):
            editing.export_clip(video, start, end, tmp_path / "bad.mp4")
    assert not (tmp_path / "bad.mp4").exists()


def test_a_write_stopped_midway_leaves_no_file_behind(moving_square, tmp_path):
    video, track = moving_square
    calls = []

    def stop(done: float, total: float) -> None:
        calls.append(done)
        if len(calls) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        editing.remove_track(video, track, tmp_path / "removed.mp4", progress=stop)
    calls.clear()
    with pytest.raises(KeyboardInterrupt):
        editing.export_frames(video, 0, 3, 10, tmp_path / "frames", progress=stop)
    assert list(tmp_path.iterdir()) == []


def test_removing_the_square_paints_it_out_and_changes_nothing_else(moving_square, tmp_path):
    video, track = moving_square
    plain = decoded(editing.export_clip(video, 0, 3, tmp_path / "plain.mp4"))
    removed = decoded(editing.remove_track(video, track, tmp_path / "removed.mp4"))
    assert len(plain) == len(removed) == 30
    for i, (before, after) in enumerate(zip(plain, removed)):
        covered = region(track.place(i / 10, 320, 240), 320, 240, fraction=editing.GROW_FRACTION,
                         pixels=editing.GROW_PIXELS)
        assert _red(before).sum() > 800 and _red(after).sum() == 0, i
        difference = np.abs(before.astype(int) - after.astype(int)).max(axis=2)
        assert difference[~covered].mean() < 1.5 and np.percentile(difference[~covered], 99.9) < 24, i
        assert difference[covered].mean() > 20, i


def test_an_object_moving_before_a_still_camera_is_painted_out_with_the_scene_seen_behind_it(tmp_path):
    # 4 s at 10 fps over a texture of 8-px blocks of random colour: Telea's fill smears it, the background
    # seen where the square has moved on is the texture itself
    blocks = np.random.default_rng(0).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    texture = np.repeat(np.repeat(blocks, 8, axis=0), 8, axis=1)
    frames = []
    for i in range(40):
        image = texture.copy()
        image[100:140, 20 + 6 * i:60 + 6 * i] = RED
        frames.append(image)
    video = Video(write_test_video(tmp_path / "texture.mp4", frames, fps=10))
    track = Track([TrackBox(t, (20 + 60 * t, 100, 60 + 60 * t, 140)) for t in np.arange(0, 4, 0.5)], step_s=0.5)
    plain = decoded(editing.export_clip(video, 0, 4, tmp_path / "plain.mp4"))
    removed = decoded(editing.remove_track(video, track, tmp_path / "removed.mp4"))
    for i in (10, 20, 30):
        covered = region(track.place(i / 10, 320, 240), 320, 240, fraction=editing.GROW_FRACTION,
                         pixels=editing.GROW_PIXELS)
        error = np.abs(removed[i].astype(int) - texture.astype(int))[covered].mean()
        smeared = np.abs(editing.inpaint(plain[i], covered).astype(int) - texture.astype(int))[covered].mean()
        assert error < 12 and smeared > 3 * error, (i, error, smeared)  # the texture holds red blocks of its own
        outside = np.abs(removed[i].astype(int) - plain[i].astype(int)).max(axis=2)[~covered]
        assert outside.mean() < 1.5, i


def test_a_moving_camera_is_left_to_telea_rather_than_painted_from_a_background_it_does_not_show(tmp_path):
    blocks = np.random.default_rng(1).integers(0, 256, (30, 60, 3), dtype=np.uint8)
    wide = np.repeat(np.repeat(blocks, 8, axis=0), 8, axis=1)  # 480 px wide: the camera pans over it
    frames = [wide[:, 4 * i:4 * i + 320].copy() for i in range(40)]
    for image in frames:
        image[100:140, 140:180] = RED  # an object the camera follows
    video = Video(write_test_video(tmp_path / "pan.mp4", frames, fps=10))
    track = Track([TrackBox(t, (140, 100, 180, 140)) for t in np.arange(0, 4, 0.5)], step_s=0.5)
    behind = editing.Background.seen(video, track, 0.0, 4.0)
    covered = region(track.place(2.0, 320, 240), 320, 240, fraction=editing.GROW_FRACTION, pixels=editing.GROW_PIXELS)
    assert behind is not None and behind.known.any()  # a median of what the samples show around it ...
    image = decoded(editing.export_clip(video, 2.0, 2.1, tmp_path / "one.mp4"))[0]
    filled, left = behind.fill(image, covered)
    assert filled is image and left is covered  # ... which does not match this frame around the hole


def test_highlighting_the_square_draws_only_near_its_boxes(moving_square, tmp_path):
    video, track = moving_square
    plain = decoded(editing.export_clip(video, 0, 3, tmp_path / "plain.mp4"))
    drawn = decoded(editing.highlight_track(video, track, "square 0", tmp_path / "drawn.mp4"))
    assert len(drawn) == 30
    for i in (0, 12, 29):
        box = [round(v) for v in track.box_at(i / 10)]
        near = grown_union(track, [t / 10 for t in range(max(0, i - 20), i + 1)], 320, 240, pixels=8)
        near[max(0, box[1] - 40):box[1] + 4, max(0, box[0] - 8):box[0] + 110] = True  # the label, on the box
        changed = np.abs(plain[i].astype(int) - drawn[i].astype(int)).max(axis=2) > 60
        assert changed.sum() > 150 and changed[~near].sum() <= 0.01 * changed.sum(), i
        edge = changed[box[1] - 2:box[3] + 3, box[0] - 2:box[0] + 3]  # the box's left side is drawn
        assert edge.any(axis=1).mean() > 0.8, i


def test_frames_are_written_at_the_rate_into_a_new_or_empty_folder(moving_square, tmp_path):
    video, _ = moving_square
    paths = editing.export_frames(video, 0.5, 2.5, 2, tmp_path / "frames")
    assert [p.name for p in paths] == ["frame_00001_0.50s.jpg", "frame_00002_1.00s.jpg", "frame_00003_1.50s.jpg",
                                       "frame_00004_2.00s.jpg"]
    from PIL import Image

    assert Image.open(paths[0]).size == (320, 240)
    (tmp_path / "empty").mkdir()
    assert len(editing.export_frames(video, 1, 1, 1, tmp_path / "empty", image_format="png")) == 1
    with pytest.raises(OutputError, match="not an empty folder"):
        editing.export_frames(video, 0, 1, 1, tmp_path / "frames")
    with pytest.raises(VideoError, match="jpg or png"):
        editing.export_frames(video, 0, 1, 1, tmp_path / "other", image_format="gif")


# -- the tools over a real object memory -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def boat(tmp_path_factory, perception, models_dir):
    """The boat clip's object memory, built with the real offline perception, and its utility tools."""
    settings = replace(Settings.from_env(), home=tmp_path_factory.mktemp("utility-home"), models=models_dir)
    library = Library(settings.library_path)
    memory = MemoryBuilder(library, perception, settings).build(Video(video_path(BOAT)), ["objects"], progress=False)
    tools = {tool.name: tool for tool in UtilityTools(memory, settings.artifacts_dir).tools()}
    yield memory, tools, settings
    library.close()


def test_the_boat_is_one_object_seen_throughout(boat):
    memory, _, _ = boat
    found = object_track(memory, 0)
    assert found.category == "boat" and found.label == "boat 0" and len(found.track) >= 10
    assert found.track.step_s == pytest.approx(0.5)


def test_export_clip_writes_the_window_with_its_sound_once(boat):
    memory, tools, settings = boat
    observation = tools["export_clip"]("1, 3")
    assert not observation.is_error, observation.text
    path = Path(observation.artifacts["file"])
    assert path.parent == settings.artifacts_dir and path.name.startswith("clip-") and str(path) in observation.text
    facts = stream_facts(path)
    assert facts["frames"] == 60 and facts["duration_s"] == pytest.approx(2.0, abs=0.04)
    assert facts["audio_s"] == pytest.approx(2.0, abs=0.1) and facts["audio_channels"] == 2
    (clip,) = observation.media
    assert isinstance(clip, VideoMedia) and clip.source.kind == "clip" and clip.window == (1.0, 3.0)
    assert clip.source.parent == memory.video_id and observation.evidence[0].start_s == 1.0
    stamp = path.stat().st_mtime_ns
    again = tools["export_clip"]({"start_s": 1, "end_s": 3})
    assert again.artifacts["file"] == str(path) and "(made before)" in again.text and path.stat().st_mtime_ns == stamp
    assert tools["export_clip"]("5, 2").is_error and "must end after it starts" in tools["export_clip"]("5, 2").text


def test_remove_object_changes_the_boats_pixels_only_inside_its_boxes(boat, tmp_path):
    memory, tools, _ = boat
    observation = tools["remove_object"]("0")
    assert not observation.is_error, observation.text
    removed_path = Path(observation.artifacts["file"])
    (made,) = observation.media
    assert made.source.kind == "video" and made.source.path == str(removed_path) and made.source.parent == memory.video_id
    video = Video(video_path(BOAT))
    plain = decoded(editing.export_clip(video, 0, video.duration_s, tmp_path / "plain.mp4"))
    removed = decoded(removed_path)
    assert len(plain) == len(removed) == stream_facts(removed_path)["frames"] == observation.artifacts["count"]
    track = object_track(memory, 0).track
    height, width = plain[0].shape[:2]
    rate = float(av.open(str(removed_path)).streams.video[0].average_rate)
    for i in range(0, len(plain), 15):
        placed = track.place(i / rate, width, height)
        covered = region(placed, width, height, fraction=editing.GROW_FRACTION, pixels=editing.GROW_PIXELS)
        difference = np.abs(plain[i].astype(int) - removed[i].astype(int)).max(axis=2)
        # outside: the noise of two encodings (about 2 levels); inside: painted over (about 37)
        assert difference[~covered].mean() < 3.0 and np.percentile(difference[~covered], 99.5) < 24, i
        assert difference[covered].mean() > 20, i


def test_highlight_object_draws_near_the_boats_boxes(boat, tmp_path):
    memory, tools, _ = boat
    observation = tools["highlight_object"]("0")
    assert not observation.is_error and "boat" in observation.text
    start, end = observation.artifacts["start_s"], observation.artifacts["end_s"]
    video = Video(video_path(BOAT))
    assert start == 0.0 and end == pytest.approx(video.duration_s, abs=0.001)  # seen throughout: the whole clip
    plain = decoded(editing.export_clip(video, start, end, tmp_path / "plain.mp4"))
    drawn = decoded(Path(observation.artifacts["file"]))
    assert len(drawn) == len(plain)
    track = object_track(memory, 0).track
    height, width = plain[0].shape[:2]
    for i in (10, 90, 170):
        box = [round(v) for v in track.box_at(i / 29.97)]
        near = grown_union(track, [t / 29.97 for t in range(max(0, i - 60), i + 1)], width, height, pixels=8)
        near[max(0, box[1] - 40):box[3], max(0, box[0] - 8):box[0] + 110] = True  # the label, above or inside
        changed = np.abs(plain[i].astype(int) - drawn[i].astype(int)).max(axis=2) > 60
        assert changed.sum() > 300 and changed[~near].sum() <= 0.01 * changed.sum(), i


def test_export_frames_saves_one_a_second_as_new_image_sources(boat):
    _, tools, _ = boat
    observation = tools["export_frames"]("0, 4")
    folder = Path(observation.artifacts["file"])
    assert observation.artifacts["count"] == 4 and sorted(observation.artifacts["files"]) == sorted(
        p.name for p in folder.iterdir())
    assert all(isinstance(m, ImageMedia) and m.pixels.shape == (336, 592, 3) for m in observation.media)
    assert len(observation.media) == 4


def test_bad_calls_and_memories_without_video_files_get_one_line_errors(boat):
    memory, tools, settings = boat
    unknown = tools["remove_object"]("7")
    assert unknown.is_error and "no object 7" in unknown.text and "0 (boat, 0.0-6.0 s)" in unknown.text
    assert tools["highlight_object"]("a dog").is_error
    assert "\n" not in tools["export_frames"]("20, 30").text and tools["export_frames"]("20, 30").is_error
    row = {"video_id": "egoschema:abc", "path": "captions.json", "duration_s": 30.0, "fps": 0.0, "width": 0,
           "height": 0, "codec": "none"}
    captions = VideoMemory(StoredVideo(row), memory.library)
    made = UtilityTools(captions, settings.artifacts_dir).tools()
    assert [tool.name for tool in made] == ["export_clip", "highlight_object", "remove_object", "export_frames"]
    for tool, arguments in zip(made, ("0, 2", "0", "0", "0, 2")):
        observation = tool(arguments)
        assert observation.is_error and "imported from captions and has no video file" in observation.text


def test_the_object_memory_is_built_on_first_use(tmp_path, perception, models_dir):
    settings = replace(Settings.from_env(), home=tmp_path, models=models_dir)
    with Library(settings.library_path) as library:
        builder = MemoryBuilder(library, perception, settings)
        video = Video(video_path(BOAT))
        memory = VideoMemory(video, library)
        built = []

        def ensure() -> str | None:
            built.append(builder.build(video, ["objects"], progress=False))
            return None

        without = UtilityTools(memory, settings.artifacts_dir).tools()[2]("0")
        assert without.is_error and "object memory is not built" in without.text
        frames = UtilityTools(memory, settings.artifacts_dir, ensure).tools()[3]("0, 1")
        assert not frames.is_error and not built  # frames need no object memory
        found = object_track(memory, 0, ensure)
        assert built and found.category == "boat"


def _red(image: np.ndarray) -> np.ndarray:
    return (image[..., 0] > 150) & (image[..., 1] < 90) & (image[..., 2] < 90)


def test_a_box_shrinking_fast_is_carried_past_its_end_without_turning_inside_out():
    track = Track([TrackBox(1.0, (0, 0, 100, 100)), TrackBox(1.5, (40, 40, 60, 60))], step_s=0.5)
    x1, y1, x2, y2 = track.box_at(2.0)
    assert x1 <= x2 and y1 <= y2


def test_a_soundtrack_aac_cannot_take_as_it_is_is_converted_not_lost(tmp_path):
    """Unlabelled mono PCM at 192 kHz in Matroska (a layout named "1 channels", a rate AAC refuses)."""
    path = tmp_path / "pcm.mkv"
    with av.open(str(path), "w") as container:
        picture = container.add_stream("mpeg4", rate=10)
        picture.width, picture.height, picture.pix_fmt = 64, 48, "yuv420p"
        sound = container.add_stream("pcm_s16le", rate=192000)
        sound.layout = "mono"
        for index in range(20):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), index * 10, np.uint8), format="rgb24")
            frame.pts = index
            for packet in picture.encode(frame):
                container.mux(packet)
        samples = (np.sin(np.arange(192000 * 2) / 50) * 8000).astype(np.int16).reshape(1, -1)
        chunk = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        chunk.sample_rate, chunk.pts = 192000, 0
        for packet in sound.encode(chunk):
            container.mux(packet)
        for stream in (picture, sound):
            for packet in stream.encode():
                container.mux(packet)
    clip = editing.export_clip(Video(path), 0.5, 1.5, tmp_path / "clip.mp4")
    with av.open(str(clip)) as container:
        audio = container.streams.audio[0]
        assert audio.codec_context.name == "aac" and audio.channels == 1 and audio.rate == 48000
        assert sum(frame.samples for frame in container.decode(audio)) > 40000  # about a second of sound


# -- review fixes: frame times of a variable frame rate, a window that starts late -------------------------------------
VFR_GAPS = (0.04, 0.1, 0.02, 0.07, 0.033, 0.15)  # seconds between frames, in turn: 25 to 6.7 frames a second


def _grey_video(path: Path, times: list[float], *, gop: int | None = None, tone: bool = False) -> Path:
    """An mp4 whose frame ``i`` is shown from ``times[i]`` (a millisecond clock, so any times at all) and is
    grey level ``(i * 7) % 256`` with a little texture; with a 440 Hz tone as long as the picture."""
    y, x = np.mgrid[0:48, 0:64]
    with av.open(str(path), "w") as container:
        picture = container.add_stream("libx264", rate=25)
        picture.width, picture.height, picture.pix_fmt = 64, 48, "yuv420p"
        picture.codec_context.time_base = Fraction(1, 1000)
        if gop:
            picture.gop_size = gop
        sound = container.add_stream("aac", rate=16000) if tone else None
        for index, t in enumerate(times):
            image = np.full((48, 64, 3), (index * 7) % 256, np.uint8)
            image[(y // 8 + x // 8 + index) % 2 == 0] //= 2
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts, frame.time_base = round(t * 1000), Fraction(1, 1000)
            for packet in picture.encode(frame):
                container.mux(packet)
        for packet in picture.encode():
            container.mux(packet)
        if sound is not None:
            samples = (0.3 * np.sin(2 * np.pi * 440 * np.arange(int(16000 * times[-1])) / 16000)).astype(np.float32)
            chunk = av.AudioFrame.from_ndarray(samples[None, :], format="flt", layout="mono")
            chunk.sample_rate, chunk.pts = 16000, 0
            for packet in sound.encode(chunk):
                container.mux(packet)
            for packet in sound.encode():
                container.mux(packet)
    return path


def test_a_variable_frame_rate_clip_keeps_each_frames_time_and_its_sound_in_step(tmp_path):
    times, t = [], 0.0
    while t < 4.0:
        times.append(round(t, 3))
        t += VFR_GAPS[len(times) % len(VFR_GAPS)]
    video = Video(_grey_video(tmp_path / "vfr.mp4", times, tone=True))
    out = editing.export_clip(video, 1.0, 3.0, tmp_path / "clip.mp4")
    inside = [(i, s) for i, s in enumerate(times) if 1.0 <= s < 3.0]
    with av.open(str(out)) as container:
        shown = [(frame.time, frame.to_ndarray(format="rgb24")) for frame in container.decode(video=0)]
    assert len(shown) == len(inside)
    assert shown[0][0] == 0.0  # the first frame stands for the picture on screen when the window starts
    for (time_s, image), (index, source_s) in zip(shown[1:], inside[1:]):
        assert time_s == pytest.approx(source_s - 1.0, abs=1e-3), index  # at the average rate: up to 0.3 s off
        assert abs(int(np.percentile(image, 90)) - (index * 7) % 256) <= 4, index  # the frame shown then
    assert stream_facts(out)["audio_s"] == pytest.approx(2.0, abs=0.05)


class _DecodeCounter:
    """``av.open`` that counts the video frames decoded through the containers it opens."""

    def __init__(self, opener):
        self.opener, self.decoded = opener, 0

    def __call__(self, *args, **kwargs):
        counter, container = self, self.opener(*args, **kwargs)

        class Counted:
            def __getattr__(self, name):
                return getattr(container, name)

            def __enter__(self):
                container.__enter__()
                return self

            def __exit__(self, *exc):
                return container.__exit__(*exc)

            def decode(self, *streams, **kind):
                for frame in container.decode(*streams, **kind):
                    counter.decoded += isinstance(frame, av.VideoFrame)
                    yield frame

        return Counted()


@pytest.mark.parametrize("start_s", [3.35, 3.0, 2.95, 5.9])
def test_a_window_that_starts_late_is_read_from_the_keyframe_before_it_with_the_same_frames(tmp_path, monkeypatch,
                                                                                           start_s):
    """6 s at 10 frames a second, a keyframe every second, B-frames (x264's default): a window from
    mid-second, from a keyframe, from just before one (the keyframe is decoded before it is shown) and at
    the very end."""
    video = Video(_grey_video(tmp_path / "gops.mp4", [i / 10 for i in range(60)], gop=10))
    end_s = min(start_s + 1.3, video.duration_s)
    whole = [f for f in video.frames_between(0.0, video.duration_s) if start_s - 1e-6 <= f.time_s < end_s - 1e-6]
    counter = _DecodeCounter(av.open)
    monkeypatch.setattr(av, "open", counter)
    window = list(video.frames_between(start_s, end_s))
    assert [f.time_s for f in window] == [f.time_s for f in whole] and len(window) >= 1
    assert all(np.array_equal(a.image, b.image) for a, b in zip(window, whole))
    assert counter.decoded <= (end_s - start_s) * 10 + 20  # from the keyframe before: not the 30-odd frames before it


# -- review fixes: identical requests at once, a length limit, an output that cannot be written ------------------------
def test_two_identical_requests_at_once_both_get_the_one_output(moving_square, tmp_path):
    """Both threads pass the look for a made output before either has written it (the progress callback holds
    the first maker until the second has arrived, or for 0.4 s where the second waits its turn)."""
    video, _ = moving_square
    arrived = threading.Barrier(2, timeout=0.4)

    def meet(done: float, total: float) -> None:
        try:
            arrived.wait()
        except threading.BrokenBarrierError:
            pass

    for kind, make in (("frames", lambda edits: edits.frames(0, 3, 10, progress=meet)),
                       ("clip", lambda edits: edits.clip(0.5, 2.5, progress=meet))):
        arrived.reset()
        results: list[object] = []

        def request() -> None:
            try:
                results.append(make(VideoEdits(video, tmp_path / "artifacts")))
            except Exception as error:  # noqa: BLE001 - the failure is what the test looks for
                results.append(error)

        threads = [threading.Thread(target=request) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert all(not isinstance(result, Exception) for result in results), (kind, results)
        first, second = results
        assert first.path == second.path and sorted([first.reused, second.reused]) == [False, True], kind
        assert first.count == second.count == (30 if kind == "frames" else 20), kind
    assert not [p for p in (tmp_path / "artifacts").iterdir() if ".part" in p.name]


def test_an_edit_longer_than_allowed_is_refused_before_any_of_it_is_made(moving_square, tmp_path):
    video, track = moving_square
    edits = VideoEdits(video, tmp_path, max_seconds=2.0)
    assert edits.clip(0.5, 2.5).count == 20
    with pytest.raises(EditTooLong, match="2.5 s of the video, more than the 2 s allowed") as refused:
        edits.clip(0, 2.5)
    assert (refused.value.kind, refused.value.limit) == ("clip", 2.0)
    with pytest.raises(EditTooLong, match="the frames would cover 3.0 s"):
        edits.frames(0, 3, 1)
    with pytest.raises(EditTooLong, match="the remove would cover"):
        edits.remove(object_track_of(track))
    assert sorted(p.name.split("-")[0] for p in tmp_path.iterdir()) == ["clip"]


def object_track_of(track: Track):
    from vidagent.tools.edits import ObjectTrack

    return ObjectTrack(0, "square", track)


def test_an_output_that_cannot_be_written_is_an_output_error_naming_where(moving_square, tmp_path):
    video, _ = moving_square
    (tmp_path / "taken.mp4").mkdir()  # a folder where the clip goes: the rename fails
    with pytest.raises(OutputError, match="cannot write the video") as failed:
        editing.export_clip(video, 0, 1, tmp_path / "taken.mp4")
    assert failed.value.path == str(tmp_path / "taken.mp4") and "cannot write" in failed.value.problem
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="cannot write the frames"):
        editing.export_frames(video, 0, 1, 1, tmp_path / "file" / "frames")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "taken.mp4"]
