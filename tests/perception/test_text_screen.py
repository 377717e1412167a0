"""The text screen in front of OCR: frames drawn here (a caption, a small watermark, blank, a smooth
natural-ish picture, a busy texture) and a reader that counts its calls. Fast tier: no model."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from conftest import frame_at
from vidagent.perception.base import TextBox, read_texts
from vidagent.perception.text_screen import LineTest, ScreenedTextReader, TextScreen

WIDTH, HEIGHT = 640, 360


def _natural(seed: int = 0) -> np.ndarray:
    """A smooth, cloudy picture: low-frequency noise in three channels, with a soft vertical gradient."""
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(40, 210, (9, 16, 3)).astype(np.float32)
    picture = cv2.resize(coarse, (WIDTH, HEIGHT), interpolation=cv2.INTER_CUBIC)
    picture += np.linspace(-20, 20, HEIGHT, dtype=np.float32)[:, None, None]
    picture += rng.normal(0, 2, picture.shape).astype(np.float32)  # sensor noise
    return np.clip(picture, 0, 255).astype(np.uint8)


def _with_text(image: np.ndarray, text: str, origin: tuple[int, int], scale: float, colour=(255, 255, 255)) -> np.ndarray:
    out = image.copy()
    cv2.putText(out, text, origin, cv2.FONT_HERSHEY_SIMPLEX, scale, colour, max(1, round(2 * scale)), cv2.LINE_AA)
    return out


def test_a_caption_and_a_small_watermark_may_hold_text():
    screen = TextScreen()
    assert screen.may_hold_text(_with_text(_natural(), "Keep away from children", (40, 320), 1.0))
    assert screen.may_hold_text(_with_text(_natural(1), "clideo.com", (520, 30), 0.5))  # a corner watermark
    blank = np.full((HEIGHT, WIDTH, 3), 30, np.uint8)
    assert screen.may_hold_text(_with_text(blank, "108", (300, 200), 0.8))  # three digits on a sail


def test_the_lines_found_are_where_the_text_is():
    lines = TextScreen().text_lines(_with_text(_natural(2), "Keep away from children", (40, 320), 1.0))
    assert lines  # the caption's words, in the frame's own pixels
    assert min(x for x, _, _, _ in lines) <= 60 and max(x + w for x, _, w, _ in lines) >= 400
    assert all(280 <= y and y + h <= 340 for _, y, _, h in lines)


def test_large_text_is_found_at_the_coarse_scale():
    for seed, (word, scale) in enumerate([("SALE", 4.0), ("OPEN", 3.0), ("Chapter 2", 2.5), ("12:30", 3.0)]):
        assert TextScreen().may_hold_text(_with_text(_natural(seed), word, (40, 250), scale)), word


def test_blank_and_natural_frames_hold_no_text():
    screen = TextScreen()
    assert not screen.may_hold_text(np.zeros((HEIGHT, WIDTH, 3), np.uint8))
    assert not screen.may_hold_text(np.full((HEIGHT, WIDTH, 3), 200, np.uint8))
    for seed in range(5):
        assert not screen.may_hold_text(_natural(seed)), seed


def test_a_busy_texture_is_edges_everywhere_not_lines():
    rng = np.random.default_rng(7)
    grass = rng.integers(0, 256, (HEIGHT // 2, WIDTH // 2), dtype=np.uint8)
    grass = cv2.resize(grass, (WIDTH, HEIGHT), interpolation=cv2.INTER_NEAREST)
    assert not TextScreen().may_hold_text(np.dstack([grass // 3, grass, grass // 3]))


def test_greyscale_and_small_frames_are_screened_too():
    frame = cv2.cvtColor(_with_text(_natural(3), "Exit 12", (60, 200), 1.2), cv2.COLOR_RGB2GRAY)
    assert TextScreen().may_hold_text(frame)
    small = cv2.resize(_with_text(_natural(4), "OPEN", (200, 200), 2.0), (212, 120), interpolation=cv2.INTER_AREA)
    assert TextScreen().may_hold_text(small)


class _CountingReader:
    name = "counting-reader"

    def __init__(self) -> None:
        self.calls = 0

    def read(self, image: np.ndarray) -> list[TextBox]:
        self.calls += 1
        return [TextBox("read", (0.0, 0.0, 1.0, 1.0), 0.99)]


def test_the_screened_reader_reads_only_frames_that_may_hold_text():
    inner = _CountingReader()
    reader = ScreenedTextReader(inner)
    assert reader.read(_natural()) == [] and inner.calls == 0
    assert reader.read(_with_text(_natural(), "Keep away from children", (40, 320), 1.0))[0].text == "read"
    assert inner.calls == 1 and (reader.read_calls, reader.skipped) == (1, 1)
    assert reader.name.startswith("counting-reader+text-screen-v1(")
    assert reader.name != ScreenedTextReader(inner, TextScreen((LineTest(gradient=80),))).name  # its thresholds name it


class _ManyAtOnceReader(_CountingReader):
    """A reader that reads several images in one call, each answered with its own mean grey level."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def read(self, image: np.ndarray) -> list[TextBox]:
        self.calls += 1
        return [TextBox(f"{float(np.mean(image)):.1f}", (0.0, 0.0, 1.0, 1.0), 0.99)]

    def read_many(self, images: list[np.ndarray]) -> list[list[TextBox]]:
        self.batches.append(len(images))
        return [self.read(image) for image in images]


def test_the_screened_reader_hands_the_frames_it_passes_to_the_reader_together_and_keeps_their_order():
    captioned = [_with_text(_natural(seed), "Keep away from children", (40, 320), 1.0) for seed in (5, 6)]
    frames = [_natural(1), captioned[0], _natural(2), captioned[1]]
    inner = _ManyAtOnceReader()
    reader = ScreenedTextReader(inner)
    readings = reader.read_many(frames)
    assert inner.batches == [2] and (reader.read_calls, reader.skipped) == (2, 2)
    assert readings[0] == readings[2] == []
    assert [box.text for box in readings[1] + readings[3]] == [f"{float(np.mean(f)):.1f}" for f in captioned]
    # a reader without read_many is read a frame at a time, to the same readings
    assert ScreenedTextReader(_CountingReader()).read_many(frames)[1][0].text == "read"
    assert read_texts(reader, frames) == readings


@pytest.mark.clips
def test_real_frames_with_text_pass_and_a_frame_without_is_skipped():
    screen = TextScreen()
    # what OCR reads in them (tests/perception/test_ocr.py): a watermark, a caption, a small sail number
    for clip, t in [("github_Video-LLaVA/sample_demo_1.mp4", 2.0), ("github_LLaMA-Factory/3.mp4", 1.0),
                    ("github_VideoAgent/boats.mp4", 0.0), ("github_VideoAgent/boats.mp4", 6.0)]:
        assert screen.may_hold_text(frame_at(clip, t)), (clip, t)
    assert not screen.may_hold_text(frame_at("github_Ask-Anything/playing_guitar.mp4", 3.0))  # a bass's neck
