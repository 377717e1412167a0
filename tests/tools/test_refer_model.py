"""refer_object's one call to a chat model, with the real embedded model (Qwen2.5-Coder 1.5B): on the generated
shapes clip (``fakes.shapes``: three cups, two dogs, a person) an expression naming no class the parser knows
is read by the model, which picks a dog for "the pet" and names no object for "the kangaroo"."""

from __future__ import annotations

from dataclasses import replace

import pytest

from vidagent.errors import ModelUnavailableError
from vidagent.models.install import model_path
from vidagent.session import Session
from vidagent.tools.referent import ReferenceError

from fakes.library import fake_settings
from fakes.perception import scripted_perception
from fakes.shapes import BLACK_DOG, WHITE_DOG, build_shapes_home

pytestmark = pytest.mark.models


def test_the_embedded_model_reads_what_the_parser_cannot(tmp_path, models_dir):
    try:
        model_path("qwen2.5-1.5b", models_dir)
    except ModelUnavailableError:
        pytest.skip("the embedded chat model is not installed: run `vidagent models install qwen2.5-1.5b`")
    home = tmp_path / "home"
    path, clip = build_shapes_home(home)
    settings = replace(fake_settings(home), models=models_dir).with_llm(model="qwen2.5-1.5b")
    with Session(settings, perception=scripted_perception(clip)) as session:
        pet = session.refer_masks(path, "the pet", [0.0]).referent
        assert (pet.object_id in (BLACK_DOG, WHITE_DOG), pet.how) == (True, "model")
        with pytest.raises(ReferenceError, match="the model found none either"):
            session.refer_masks(path, "the kangaroo", [0.0])
