"""Known watermark words (perception/overlay_words.py): a stock vendor's logo read a few letters off is read as the
vendor's name; other words, short words and lines of several words are left as read."""

from __future__ import annotations

import pytest

from vidagent.perception.overlay_words import edit_distance, known_overlay_word, overlay_words


@pytest.mark.parametrize("reading", ["snutterstcck", "shutterstck", "shuttersteck"])
def test_near_misreadings_of_a_vendor_name_become_the_name(reading):
    assert known_overlay_word(reading) == "shutterstock"


@pytest.mark.parametrize("reading", ["Shutterstock", "SHUTTERSTOCK.", "clideo.com", "laundry", "nuiuterst", "stock", "shutter stock",
                                     "the countdown", "istocks are"])
def test_other_readings_are_left_as_read(reading):
    assert known_overlay_word(reading) == reading


def test_the_word_list_and_the_distance():
    words = overlay_words()
    assert "shutterstock" in words and all(word == word.strip().lower() and not word.startswith("#") for word in words)
    assert edit_distance("snutterstcck", "shutterstock") == 2
    assert edit_distance("", "abc") == 3 and edit_distance("abc", "abc") == 0
