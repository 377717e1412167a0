"""Playable copies (``vidagent.video.proxy``) of generated clips: which files browsers play as they are, and the
copy of one they do not: H.264 (or VP9) a browser plays, at the source's times, upright, with its sound; a
damaged source refused in words."""

from __future__ import annotations

import av
import pytest

from vidagent.errors import VideoError
from vidagent.video import proxy
from vidagent.video.proxy import PROXY_FORMATS, make_proxy, output_size, playability, proxy_format
from vidagent.video.video import Video

from conftest import set_mp4_rotation
from hostile_clips import many_streams_clip, repeated_keyframe_clip
from unplayable_clips import FPS, damaged_clip, h264_clip, mpeg4_clip

CODECS = {"libx264": "h264", "libvpx-vp9": "vp9"}  # the copy's encoder, the codec a reader finds
FORMATS = [form for form in PROXY_FORMATS if form.video_codec in CODECS and form.video_codec in av.codecs_available]


def test_what_browsers_play_as_it_is(tmp_path):
    assert playability(h264_clip(tmp_path / "h264.mp4", audio=True)).playable
    mpeg4 = playability(mpeg4_clip(tmp_path / "mpeg4.mp4", audio=True))
    assert not mpeg4.playable
    assert mpeg4.reason == "MPEG-4 Part 2 in MP4/QuickTime with AAC sound: web browsers do not play MPEG-4 Part 2 video"
    avi = tmp_path / "h264.avi"
    with av.open(str(avi), "w") as container:  # H.264 pictures, but in AVI, which no browser opens
        stream = container.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        container.mux(stream.encode(av.VideoFrame(64, 48, "yuv420p")))
        container.mux(stream.encode())
    assert "do not open AVI files" in playability(avi).reason
    with pytest.raises(VideoError, match="cannot read as a video"):
        playability(tmp_path / "nothing.mp4")


@pytest.mark.parametrize("form", FORMATS, ids=lambda form: form.video_codec)
def test_a_copy_plays_keeps_the_times_and_the_sound(tmp_path, form):
    source = mpeg4_clip(tmp_path / "mpeg4.mp4", seconds=3.0, audio=True)
    shares: list[float] = []
    copy = make_proxy(Video(source), tmp_path / f"copy{form.suffix}", form, progress=shares.append)
    assert copy.name == f"copy{form.suffix}" and [p.name for p in tmp_path.iterdir() if ".part" in p.name] == []
    assert playability(copy).playable
    assert shares == sorted(shares) and shares[-1] == 1.0 and len(shares) > 10
    with av.open(str(copy)) as container:
        picture = container.streams.video[0]
        assert picture.codec_context.codec.canonical_name == CODECS[form.video_codec]
        assert picture.codec_context.pix_fmt == "yuv420p" and container.streams.audio
        times = [frame.time for frame in container.decode(picture)]
    assert len(times) == 30 and abs(times[0]) < 1e-3 and abs(times[-1] - 2.9) < 0.02


def test_a_copy_is_upright_even_and_at_most_max_side(tmp_path):
    source = h264_clip(tmp_path / "turned.mp4", size=(160, 96))
    set_mp4_rotation(source, 1)
    video = Video(source)
    assert (video.info.width, video.info.height) == (96, 160)
    copy = make_proxy(video, tmp_path / "copy.mp4", PROXY_FORMATS[0], max_side=101)
    with av.open(str(copy)) as container:
        stream = container.streams.video[0]
        assert (stream.width, stream.height) == (60, 100)  # upright, scaled to fit 101, even sides
    assert output_size(161, 99, 1920) == (160, 98) and output_size(3840, 2160, 1920) == (1920, 1080)


def test_a_damaged_source_is_refused_in_words_and_leaves_nothing(tmp_path):
    video = Video(damaged_clip(tmp_path / "damaged.mp4"))  # it opens: its first frame decodes
    with pytest.raises(VideoError, match=r"the video data is damaged: \d+ of its 20 video packets cannot be decoded"):
        make_proxy(video, tmp_path / "out" / "copy.mp4", PROXY_FORMATS[0])
    assert list((tmp_path / "out").iterdir()) == []


def test_the_first_installed_format_is_chosen():
    installed = [form for form in PROXY_FORMATS if form.video_codec in av.codecs_available]
    assert installed and proxy_format() == installed[0]
    assert proxy_format(PROXY_FORMATS[1:]).container == "webm"
    missing = PROXY_FORMATS[0].__class__("none", "no-such-encoder", "mp4", ".mp4", "video/mp4", ())
    assert proxy_format((missing,)) is None


@pytest.mark.parametrize("case", ["picture too large", "hours declared", "hundreds of streams"])
def test_a_source_whose_header_asks_too_much_is_refused_before_any_frame_is_copied(tmp_path, monkeypatch, case):
    """Issue 55: a 287 KB VP9 file (one 8192 x 8192 keyframe shown again 20,000 times) took 22 minutes of CPU and
    +1 GB. Its header says what it costs: the picture cap is made small here, so the clip is small and fast."""
    if case == "picture too large":
        monkeypatch.setattr(proxy, "MAX_SOURCE_PIXELS", 512 * 512)
        source, expected = repeated_keyframe_clip(tmp_path / "bomb.mp4", size=(1024, 1024), repeats=200), \
            r"its picture is 1024 x 1024, larger than a playable copy is made of"
    elif case == "hours declared":
        source, expected = repeated_keyframe_clip(tmp_path / "bomb.mp4", size=(64, 64), repeats=3, last_at_s=20 * 3600), \
            r"it declares 20.0 hours, longer than a playable copy is made of \(at most 12 hours\)"
    else:
        source, expected = many_streams_clip(tmp_path / "bomb.mkv", streams=500), \
            r"it holds 501 streams, more than a playable copy is made of \(at most 64\)"
    video = Video(source)
    transcoded = []
    monkeypatch.setattr(proxy._Transcoder, "run", lambda self, progress: transcoded.append(self))
    with pytest.raises(VideoError, match=expected) as raised:
        make_proxy(video, tmp_path / "out" / "copy.mp4", PROXY_FORMATS[0])
    assert "\n" not in str(raised.value) and transcoded == []
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("cap", ["time", "size", "frames"])
def test_a_copy_past_its_time_size_or_frame_cap_is_stopped_and_leaves_nothing(tmp_path, monkeypatch, cap):
    """3,000 one-byte packets each show a 256 x 256 keyframe again: a copy of 100 s of frames from 16 KB."""
    video = Video(repeated_keyframe_clip(tmp_path / "repeats.mp4", size=(256, 256), repeats=3000))
    if cap == "time":
        monkeypatch.setattr(proxy, "MIN_COPY_S", 0.3)
        monkeypatch.setattr(proxy, "COPY_S_PER_SECOND", 0.0)
        expected = r"its copy took more than 0 s \(at \d[\d,]* frames\) and was stopped"
    elif cap == "size":
        monkeypatch.setattr(proxy, "MIN_COPY_BYTES", 2000)
        monkeypatch.setattr(proxy, "COPY_BYTES_PER_SECOND", 0)
        expected = r"its copy grew past 2,000 bytes and was stopped"
    else:
        monkeypatch.setattr(proxy, "MAX_RATE", proxy.Fraction(5))  # 100 s may hold at most 510 frames
        expected = r"more frames than its 100.033 s hold at 5 frames a second; the copy was stopped"
    with pytest.raises(VideoError, match=expected):
        make_proxy(video, tmp_path / "out" / "copy.mp4", PROXY_FORMATS[0])
    assert list((tmp_path / "out").iterdir()) == []
