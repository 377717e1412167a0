"""The Hugging Face video classifier (issue 25, item 2) on tiny randomly initialised checkpoints built from
configs here (no download): VideoMAE with a classification head and X-CLIP zero-shot over label texts,
loaded through vidagent's loading code; then the actions stage with it on the generated clip of
tests/memory/test_actions.py. The labels are meaningless; the contract is what is checked."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

from fakes import fake_settings, library_from_rows, scripted_perception  # noqa: E402
from hf_tiny_models import _save, char_clip_text_config, char_clip_tokenizer  # noqa: E402
from test_actions import _shapes_clip  # noqa: E402
from vidagent.config import Settings  # noqa: E402
from vidagent.errors import ModelUnavailableError  # noqa: E402
from vidagent.memory.store import Library  # noqa: E402
from vidagent.perception.hf import HFVideoClassifier, build_backend  # noqa: E402
from vidagent.perception.hf.video_classifier import default_action_labels  # noqa: E402

pytestmark = pytest.mark.models
KINETICS_LIKE = ("walking the dog", "dancing", "riding a bike")


def save_videomae(folder: Path) -> Path:
    config = tf.VideoMAEConfig(image_size=32, patch_size=8, num_frames=4, tubelet_size=2, hidden_size=32,
                               num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                               id2label=dict(enumerate(KINETICS_LIKE)),
                               label2id={label: i for i, label in enumerate(KINETICS_LIKE)})
    torch.manual_seed(11)
    processor = tf.VideoMAEImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    return _save(folder, tf.VideoMAEForVideoClassification(config), processor)


def save_xclip(folder: Path) -> Path:
    tokenizer = char_clip_tokenizer()
    vocab = tokenizer.get_vocab()
    image_processor = tf.VideoMAEImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    config = tf.XCLIPConfig(
        text_config=char_clip_text_config(len(vocab)),
        vision_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                           image_size=32, patch_size=8, num_frames=4, mit_hidden_size=32, mit_intermediate_size=37,
                           mit_num_hidden_layers=1, mit_num_attention_heads=4),
        projection_dim=32, prompt_layers=1, prompt_attention_heads=4, prompt_num_attention_heads=4)
    torch.manual_seed(12)
    return _save(folder, tf.XCLIPModel(config), tf.XCLIPProcessor(image_processor=image_processor, tokenizer=tokenizer))


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _clips(count: int, frames: int, rng: np.random.Generator) -> list[list[np.ndarray]]:
    return [[rng.integers(0, 256, (40 + 7 * c, 30, 3), dtype=np.uint8) for _ in range(frames)] for c in range(count)]


def test_videomae_names_clips_with_its_checkpoints_labels(tmp_path):
    classifier = build_backend("video_classifier", f"hf:{save_videomae(tmp_path / 'videomae')}?batch_size=2")
    assert isinstance(classifier, HFVideoClassifier) and classifier.num_frames == 4  # read from the config
    clips = _clips(3, 7, np.random.default_rng(0))  # 7 frames each: resampled to 4
    labels = classifier.classify(clips, top_k=2)
    assert [len(found) for found in labels] == [2, 2, 2]
    for found in labels:
        assert {label.name for label in found} <= set(KINETICS_LIKE)
        assert 0 < found[1].score <= found[0].score <= 1
    assert classifier.classify(clips, top_k=2) == labels  # deterministic
    assert classifier.classify(clips[:1], top_k=3)[0][0] == labels[0][0]  # batching does not change a clip's labels


def test_xclip_chooses_among_label_texts(tmp_path):
    folder = save_xclip(tmp_path / "xclip")
    chosen = build_backend("actions", f"hf:{folder}?labels=waving|jumping|sitting down")
    assert chosen.num_frames == 4 and "labels=waving" in chosen.name
    labels = chosen.classify(_clips(2, 4, np.random.default_rng(1)), top_k=3)
    assert [sorted(label.name for label in found) for found in labels] == [["jumping", "sitting down", "waving"]] * 2
    assert all(abs(sum(label.score for label in found) - 1) < 1e-4 for found in labels)  # softmax over the texts
    default = HFVideoClassifier(str(folder)).classify(_clips(1, 4, np.random.default_rng(2)), top_k=1)
    assert default[0][0].name in default_action_labels() and "walking" in default_action_labels()


def test_a_missing_checkpoint_is_a_one_line_error(tmp_path):
    with pytest.raises(ModelUnavailableError, match="video classifier"):
        build_backend("video_classifier", f"hf:{tmp_path / 'nowhere'}").classify([[np.zeros((8, 8, 3), np.uint8)]])
    with pytest.raises(ModelUnavailableError, match="takes no option"):
        build_backend("video_classifier", "hf?threshold=0.5")


def test_the_actions_stage_adds_the_classifiers_actions_for_people(tmp_path):
    folder = save_videomae(tmp_path / "videomae")
    clip = _shapes_clip()
    perception = replace(scripted_perception(clip), video_classifier=build_backend("video_classifier", f"hf:{folder}"))
    settings = fake_settings(tmp_path, library=tmp_path / "library.sqlite")
    video = library_from_rows(tmp_path / "library.sqlite", [clip], ["objects"], settings=settings,
                              perception=perception)[clip.name]
    with Library(tmp_path / "library.sqlite") as library:
        rows = library.rows("""SELECT o.category, a.verb, a.start_s, a.end_s, a.confidence FROM actions a
                               JOIN objects o USING (video_id, object_id) WHERE a.video_id=? AND a.source='classifier'
                               ORDER BY a.start_s""", (video.content_hash,))
        config = library.rows("SELECT config FROM stages WHERE video_id=? AND stage='actions'", (video.content_hash,))
    assert rows and {row[0] for row in rows} == {"person"}  # people only, as Kinetics names what people do
    assert all(verb in KINETICS_LIKE and 1.0 <= start <= end <= 5.5 and score >= 0.3
               for _, verb, start, end, score in rows)
    assert '"classifier": "hf:' in config[0][0]  # a stored memory without it rebuilds
    assert Settings.from_env({"VIDAGENT_VIDEO_CLASSIFIER": "hf"}).backends.video_classifier == "hf"
