"""Model copies lent one caller at a time (the detector pool's and the OCR reader's). Fast tier: plain objects."""

from __future__ import annotations

import threading

import pytest

from vidagent.perception.copies import ModelCopies


def test_calls_one_at_a_time_keep_to_the_first_copy_and_overlapping_ones_get_another():
    made: list[int] = []
    copies = ModelCopies(lambda: made.append(len(made)) or len(made) - 1, 3)
    for _ in range(3):
        with copies.lent() as copy:
            assert copy == 0
    assert made == [0]
    with copies.lent() as first, copies.lent() as second:
        assert (first, second) == (0, 1)
    assert copies.made() == [0, 1] and copies.at(2) == 2 and copies.made() == [0, 1, 2]


def test_a_caller_waits_while_every_copy_is_lent():
    copies = ModelCopies(object, 1)
    lent_twice = threading.Event()

    def borrow() -> None:
        with copies.lent():
            lent_twice.set()

    with copies.lent():
        thread = threading.Thread(target=borrow)
        thread.start()
        assert not lent_twice.wait(0.2)
    thread.join(5)
    assert lent_twice.is_set() and len(copies.made()) == 1


def test_a_copy_that_cannot_be_made_is_not_kept_and_its_slot_is_free_again():
    attempts: list[int] = []

    def make() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("model missing")
        return "model"

    copies = ModelCopies(make, 1)
    with pytest.raises(RuntimeError, match="model missing"):
        with copies.lent():
            pass
    with copies.lent() as copy:
        assert copy == "model"


def test_at_least_one_copy():
    with pytest.raises(ValueError, match="at least one copy"):
        ModelCopies(object, 0)
