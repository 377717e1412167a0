"""The toolbox carries the question's sources as media, in the user's order; what the planners read of
them (the first video's account, the opened memories) is derived from those."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from vidagent.agent.toolbox import Toolbox
from vidagent.tools.media import ImageMedia
from vidagent.video.source import Source

from fakes.media import counted_video

PICTURE = ImageMedia(Source("i1", "image"), np.zeros((4, 6, 3), np.uint8))


def test_the_video_is_the_first_video_among_the_sources_and_its_memory_is_listed():
    video = counted_video("v1", 6.0, 3, 2.0)
    toolbox = Toolbox({}, sources=(PICTURE, video))
    assert toolbox.video is video and (toolbox.video.duration_s, toolbox.video.segment_count) == (6.0, 3)
    assert dict(toolbox.memories) == {"v1": video.memory}
    assert Toolbox({}, sources=(PICTURE,)).video is None and not Toolbox({}).memories


def test_a_memory_without_segments_is_told_the_settings_segment_length():
    assert replace(counted_video("v1", 6.0, 0, 0.0), segment_fallback_s=2.0).segment_seconds == 2.0
    assert replace(counted_video("v1", 6.0, 3, 1.0), segment_fallback_s=2.0).segment_seconds == 1.0


def test_a_video_whose_memory_was_not_opened_shows_no_segments_and_no_memory():
    unopened = replace(counted_video("v1", 6.0, 3, 1.0), segment_fallback_s=2.0, opened=False)
    toolbox = Toolbox({}, sources=(unopened,))
    assert (toolbox.video.segment_count, toolbox.video.segment_seconds, toolbox.video.duration_s) == (0, 2.0, 6.0)
    assert not toolbox.memories


def test_a_clip_keeps_what_its_video_tells():
    video = replace(counted_video("v1", 6.0, 3, 0.0), segment_fallback_s=2.0)
    clip = video.clip(2.0, 4.0)
    assert clip.source.parent == "v1" and clip.duration_s == 2.0 and clip.segment_seconds == 2.0
