"""A glance with the real offline models on a real clip: a refined window, and the memory a full index completes
from the glance, equal a fresh full index (real frames: the near-duplicate chain and the decoding after a seek
must give the full build's results)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from vidagent.config import Settings
from vidagent.memory.builder import TEMPORAL_STAGES, MemoryBuilder
from vidagent.memory.glance import Glance
from vidagent.memory.store import Library
from vidagent.video.video import Video

from conftest import video_path

pytestmark = [pytest.mark.models, pytest.mark.clips]
CLIP = "github_Video-LLaVA/sample_demo_22.mp4"  # 36 s


def _tables(library: Library, video_id: str) -> dict[str, list[tuple]]:
    order = {"frames": "time_s", "text_in_frame": "time_s, text", "speech": "start_s", "segments": "segment_id",
             "clips": "clip_id"}
    return {table: library.rows(f"SELECT * FROM {table} WHERE video_id=? ORDER BY {key}", (video_id,))
            for table, key in order.items()}


def _same(glanced: list[tuple], full: list[tuple]) -> None:
    """Rows equal, embeddings (bytes of float32) within float noise of a batch of another size."""
    assert len(glanced) == len(full)
    for a, b in zip(glanced, full):
        for x, y in zip(a, b):
            if isinstance(x, bytes):
                assert np.allclose(np.frombuffer(x, np.float32), np.frombuffer(y, np.float32), atol=1e-5)
            else:
                assert x == y


def test_a_glance_refined_and_completed_equals_a_fresh_full_index(perception, tmp_path):
    video = Video(video_path(CLIP))
    settings = replace(Settings.from_env(), home=tmp_path, perception=frozenset())
    with Library(tmp_path / "full.sqlite") as library:
        MemoryBuilder(library, perception, settings).build(video, TEMPORAL_STAGES, progress=False)
        full = _tables(library, video.content_hash)
    with Library(tmp_path / "glance.sqlite") as library:
        builder = MemoryBuilder(library, perception, settings)
        memory = Glance(builder, video, 10.0).open()
        assert memory.coverage is not None and len(library.frames(video.content_hash)) < len(full["frames"])
        assert memory.refine(20.0, 30.0)
        frames = {row[1]: row for row in full["frames"]}
        refined = [row for row in _tables(library, video.content_hash)["frames"] if 20.0 <= row[1] < 30.0]
        assert refined == [frames[row[1]] for row in refined] and len(refined) == 5
        segments = {row[1]: row for row in full["segments"]}
        _same([row[:7] for row in _tables(library, video.content_hash)["segments"] if 20.0 <= row[2] < 30.0],
              [segments[i][:7] for i in range(10, 15)])
        builder.build(video, TEMPORAL_STAGES, progress=False)
        completed = _tables(library, video.content_hash)
        for table in full:
            _same(completed[table], full[table])
