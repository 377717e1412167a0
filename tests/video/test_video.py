"""The Video handle on real clips and on deliberately broken files."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from vidagent.errors import VideoError
from vidagent.video.video import AUDIO_SAMPLE_RATE, Video

from conftest import set_mp4_rotation, video_path, write_test_video


@pytest.mark.parametrize(
    "relative, width, height, fps, duration, has_audio",
    [
        ("github_sam2/01_dog.mp4", 1280, 720, 29.97, 9.66, True),
        ("github_Ask-Anything/hitting_baseball.mp4", 426, 320, 30.0, 10.0, False),
        ("github_Video-LLaMA/skateboarding_dog.mp4", 576, 1024, 29.97, 14.05, True),
        ("github_mmaction2/test.avi", 320, 240, 25.0, 6.56, True),
        ("github_decord/flipping_a_pancake.mkv", 426, 240, 30.0, 10.38, True),
        ("github_InternVideo/example1.mp4", 640, 480, 5.0, 8.0, False),
    ],
)
def test_metadata_of_real_clips(relative, width, height, fps, duration, has_audio):
    video = Video(video_path(relative))
    info = video.info
    assert (info.width, info.height) == (width, height)
    assert info.fps == pytest.approx(fps, abs=0.01)
    assert info.duration_s == pytest.approx(duration, abs=0.1)
    assert info.has_audio is has_audio
    assert len(info.content_hash) == 32


def test_sampling_gives_frames_in_time_order_at_requested_rate():
    video = Video(video_path("github_Video-LLaMA/skateboarding_dog.mp4"))
    frames = list(video.sample(2.0, max_side=512))
    assert len(frames) == int(video.duration_s * 2)
    times = [f.time_s for f in frames]
    assert times == sorted(times) and times[0] == pytest.approx(0.25)
    assert all(f.image.shape == (512, 288, 3) and f.image.dtype == np.uint8 for f in frames)
    # Consecutive samples half a second apart differ (the camera follows a moving dog).
    assert np.abs(frames[0].image.astype(int) - frames[-1].image.astype(int)).mean() > 5


def test_frames_at_returns_the_frame_shown_at_each_time(tmp_path: Path):
    # Frame i of this synthetic clip has brightness 20*i; at 10 fps, time t shows frame floor(10 t).
    frames = [np.full((48, 64, 3), 20 * i, np.uint8) for i in range(10)]
    video = Video(write_test_video(tmp_path / "ramp.mp4", frames, fps=10))
    got = list(video.frames_at([0.05, 0.55, 0.31, 5.0]))
    assert [f.time_s for f in got] == [0.05, 0.31, 0.55, 5.0]
    levels = [int(round(f.image.mean())) for f in got]
    assert levels[0] == pytest.approx(0, abs=4)
    assert levels[1] == pytest.approx(60, abs=4)
    assert levels[2] == pytest.approx(100, abs=4)
    assert levels[3] == pytest.approx(180, abs=4)  # past the end: the last frame


def test_frames_decoded_on_one_thread_are_the_frames_decoded_on_several(tmp_path: Path):
    frames = [np.full((48, 64, 3), 20 * i, np.uint8) for i in range(10)]
    video = Video(write_test_video(tmp_path / "ramp.mp4", frames, fps=10))
    times = [0.05, 0.31, 0.55, 0.95, 5.0]
    several = list(video.frames_at(times))
    alone = list(video.frames_at(times, one_thread=True))
    assert [f.time_s for f in alone] == [f.time_s for f in several] == times
    assert all(np.array_equal(a.image, b.image) for a, b in zip(alone, several))
    sought = list(video.frames_at([0.55, 0.95], seek=True, one_thread=True))
    assert all(np.array_equal(a.image, b.image) for a, b in zip(sought, several[2:4]))


def _moving_square_clip(path: Path, count: int = 60) -> Path:
    """An H.264 clip whose frames differ a little each (a square moving over a fixed texture): x264 codes most
    of them as B-frames nothing is predicted from."""
    texture = np.random.default_rng(3).integers(0, 255, (96, 128, 3), dtype=np.uint8)
    frames = []
    for i in range(count):
        image = texture.copy()
        image[20:50, 2 * i % 100:2 * i % 100 + 24] = (255, 20 * (i % 12), 0)
        frames.append(image)
    return write_test_video(path, frames, fps=10)


@pytest.mark.parametrize("one_thread", [True, False])
def test_frames_nothing_is_predicted_from_are_skipped_unless_requested(tmp_path: Path, monkeypatch, one_thread):
    video = Video(_moving_square_clip(tmp_path / "square.mp4"))
    times = [0.0, 0.05, 0.1, 0.37, 1.23, 1.3, 2.0, 2.04, 3.51, 5.9, 9.0]
    decoded: list[int] = []
    plain_decoded = Video._decoded

    def counting(self, *args, **kwargs):
        for frame in plain_decoded(self, *args, **kwargs):
            decoded.append(frame.pts)
            yield frame

    monkeypatch.setattr(Video, "_decoded", counting)
    skipping = list(video.frames_at(times, one_thread=one_thread))
    assert video._frames_shown(sorted(times)) is not None
    skipped_count = len(decoded)
    decoded.clear()
    monkeypatch.setattr(Video, "_frames_shown", lambda self, targets: None)
    everything = list(video.frames_at(times, one_thread=one_thread))
    assert len(decoded) == 60 and skipped_count < 45  # the decoder skipped frames
    assert [f.time_s for f in skipping] == [f.time_s for f in everything] == times
    assert all(np.array_equal(a.image, b.image) for a, b in zip(skipping, everything))


def test_an_avi_with_packed_b_frames_is_decoded_whole():
    video = Video(video_path("github_mmaction2/test.avi"))  # its frames come out of their stamps' order
    assert video._frames_shown([0.25, 3.0]) is None


def test_keyframes_near_gives_the_nearest_keyframe_within_reach_decoding_only_keyframes(tmp_path: Path):
    # 6 s at 10 fps, a keyframe every 2 s (0, 2, 4 s); frame i has brightness 4*i
    path = tmp_path / "gop.mp4"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=10,
                                      options={"x264-params": "keyint=20:min-keyint=20:scenecut=0"})
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for i in range(60):
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.full((48, 64, 3), 4 * i, np.uint8),
                                                                   format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    video = Video(path)
    near = dict(video.keyframes_near([5.9, 0.9, 2.2, 3.1], within_s=1.0))
    assert list(near) == [0.9, 2.2, 3.1, 5.9] and near[5.9] is None  # 4 s is 1.9 s away
    assert {t: frame.time_s for t, frame in near.items() if frame is not None} == {0.9: 0.0, 2.2: 2.0, 3.1: 4.0}
    assert [int(round(near[t].image.mean())) for t in (0.9, 2.2, 3.1)] == pytest.approx([0, 80, 160], abs=4)
    assert near[0.9] is not near[2.2] and dict(video.keyframes_near([2.2, 2.3], within_s=0.5))[2.3] is not None
    shared = dict(video.keyframes_near([1.0, 3.0], within_s=1.0))  # 2 s is after 1 s's reach, at 3 s's start
    assert shared[1.0].time_s == 0.0 and shared[3.0].time_s == 2.0


def test_seek_free_decoding_of_a_single_keyframe_avi():
    # test.avi has one keyframe: seeking into it gives grey corrupt frames; straight decoding does not.
    video = Video(video_path("github_mmaction2/test.avi"))
    frames = list(video.frames_at([0.5, 3.0, 6.0]))
    assert len(frames) == 3
    assert all(frame.image.std() > 20 for frame in frames)


def test_segments_cover_the_video_without_slivers():
    video = Video(video_path("github_Video-LLaMA/skateboarding_dog.mp4"))  # 14.05 s
    segments = video.segments(2.0)
    assert [s.segment_id for s in segments] == list(range(7))
    assert segments[0].start_s == 0 and segments[-1].end_s == pytest.approx(video.duration_s, abs=1e-3)
    assert all(a.end_s == b.start_s for a, b in zip(segments, segments[1:]))


def test_audio_is_16k_mono_float():
    video = Video(video_path("github_mmaction2/test.avi"))
    audio = video.audio()
    assert audio is not None and audio.dtype == np.float32 and audio.ndim == 1
    assert len(audio) / AUDIO_SAMPLE_RATE == pytest.approx(video.duration_s, abs=0.3)
    assert 0.05 < np.abs(audio).max() <= 1.0


def test_no_audio_track_gives_none():
    assert Video(video_path("github_Ask-Anything/hitting_baseball.mp4")).audio() is None


def test_rotated_video_is_turned_upright(tmp_path: Path):
    image = np.zeros((32, 64, 3), np.uint8)
    image[:, :32] = 255  # left half white
    path = write_test_video(tmp_path / "rotated.mp4", [image] * 5, fps=5)
    set_mp4_rotation(path, clockwise_quarter_turns=1)
    video = Video(path)
    assert (video.info.width, video.info.height) == (32, 64)
    frame = next(video.frames_at([0.1])).image
    assert frame.shape[:2] == (64, 32)
    # Turning clockwise moves the white left half to the top.
    assert frame[:28].mean() > 200 and frame[36:].mean() < 50


def test_content_hash_ignores_the_file_name(tmp_path: Path):
    source = video_path("github_LLaMA-Factory/4.mp4")
    copy = tmp_path / "renamed.mp4"
    copy.write_bytes(source.read_bytes())
    assert Video(copy).content_hash == Video(source).content_hash


# -- bad input -----------------------------------------------------------------------------
def test_missing_file(tmp_path: Path):
    with pytest.raises(VideoError, match="no such file"):
        Video(tmp_path / "nope.mp4")


def test_text_file_is_not_a_video(tmp_path: Path):
    path = tmp_path / "notes.mp4"
    path.write_text("this is not a video\n" * 50)
    with pytest.raises(VideoError, match="not a video|cannot read"):
        Video(path)


def test_random_bytes_are_not_a_video(tmp_path: Path):
    path = tmp_path / "noise.mp4"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 200_000, dtype=np.uint8).tobytes())
    with pytest.raises(VideoError):
        Video(path)


def test_zero_length_file(tmp_path: Path):
    path = tmp_path / "empty.mp4"
    path.write_bytes(b"")
    with pytest.raises(VideoError):
        Video(path)


def test_audio_only_file_has_no_video_stream():
    with pytest.raises(VideoError, match="no video stream"):
        Video(video_path("github_LLaMA-Factory/4.mp3"))


def test_truncated_video(tmp_path: Path):
    source = video_path("github_Ask-Anything/yoga.mp4")
    data = source.read_bytes()
    path = tmp_path / "truncated.mp4"
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(VideoError):
        video = Video(path)
        list(video.sample(1.0))


def test_directory_is_not_a_video(tmp_path: Path):
    with pytest.raises(VideoError, match="not a file"):
        Video(tmp_path)
