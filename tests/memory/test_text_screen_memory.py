"""The text screen in a real build: the frames stage through the offline suite writes the same
text_in_frame rows with the screen as without, and OCR reads fewer frames (none of a clip without text)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import video_path
from vidagent.config import Settings
from vidagent.memory.builder import MemoryBuilder
from vidagent.memory.store import Library
from vidagent.perception.describer import DetectorDescriber
from vidagent.perception.text_screen import ScreenedTextReader
from vidagent.video.video import Video


@pytest.mark.models
@pytest.mark.clips
def test_the_screen_keeps_the_text_memory_and_reads_fewer_frames(tmp_path, perception):
    screened = perception.describer
    assert isinstance(screened, DetectorDescriber) and isinstance(screened.text_reader, ScreenedTextReader)
    plain = replace(perception, describer=DetectorDescriber(perception.detector, perception.reader))
    for clip, reads in (("github_LLaMA-Factory/3.mp4", 3), ("github_Ask-Anything/playing_guitar.mp4", 0)):
        video = Video(video_path(clip))
        texts = {}
        for name, suite in (("plain", plain), ("screened", perception)):
            settings = replace(Settings.from_env(), home=tmp_path / clip.replace("/", "-") / name)
            read = screened.text_reader.read_calls
            with Library(settings.library_path) as library:
                MemoryBuilder(library, suite, settings).build(video, ("frames",), progress=False)
                texts[name] = library.rows("SELECT time_s, text FROM text_in_frame WHERE video_id=? ORDER BY 1, 2",
                                           (video.content_hash,))
            if name == "screened":
                assert screened.text_reader.read_calls - read == reads, clip  # 3.mp4: every frame has its caption
        assert texts["screened"] == texts["plain"], clip
    assert texts["plain"] == []  # the guitar clip: nothing to read
