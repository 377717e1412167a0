"""The Segment Anything backend's loading and box-prompt code on tiny randomly initialised SAM / SAM 2
checkpoints built from configs here (no download): masks come back one per box at the image's size.
Random weights segment nothing in particular, so only shapes, types and plumbing are checked."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from vidagent.errors import ModelUnavailableError
from vidagent.perception.base import Segmenter
from vidagent.perception.hf import LoadOptions, build_backend
from vidagent.perception.hf.segmenter import HFSegmenter

pytestmark = pytest.mark.models


def save_tiny_sam(folder: Path) -> Path:
    """SAM with a 64-pixel, two-layer image encoder."""
    import torch
    import transformers as tf

    vision = tf.SamVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                image_size=64, patch_size=16, output_channels=16, window_size=2,
                                global_attn_indexes=[1], num_pos_feats=8, mlp_dim=32)
    prompt = tf.SamPromptEncoderConfig(hidden_size=16, image_size=64, patch_size=16, mask_input_channels=4)
    decoder = tf.SamMaskDecoderConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, mlp_dim=32,
                                      iou_head_hidden_dim=16)
    torch.manual_seed(0)
    model = tf.SamModel(tf.SamConfig(vision_config=vision, prompt_encoder_config=prompt, mask_decoder_config=decoder))
    images = tf.SamImageProcessor(size={"longest_edge": 64}, pad_size={"height": 64, "width": 64},
                                  mask_size={"longest_edge": 16}, mask_pad_size={"height": 16, "width": 16})
    model.save_pretrained(folder)
    tf.SamProcessor(image_processor=images).save_pretrained(folder)
    return folder


def save_tiny_sam2(folder: Path) -> Path:
    """SAM 2 with a four-stage Hiera encoder (one block a stage, two in the third) on 64-pixel images.

    The global-attention block is the third stage's second block, as in the real checkpoints: a global
    block (window 0) that also opens a query-pooling stage makes transformers divide by zero."""
    import torch
    import transformers as tf

    hiera = tf.Sam2HieraDetConfig(hidden_size=16, num_attention_heads=1, image_size=[64, 64],
                                  blocks_per_stage=[1, 1, 2, 1], embed_dim_per_stage=[16, 32, 64, 128],
                                  num_attention_heads_per_stage=[1, 1, 1, 1], window_size_per_stage=[2, 2, 2, 2],
                                  global_attention_blocks=[3], window_positional_embedding_background_size=[2, 2])
    vision = tf.Sam2VisionConfig(backbone_config=hiera, backbone_channel_list=[128, 64, 32, 16],
                                 backbone_feature_sizes=[[16, 16], [8, 8], [4, 4]], fpn_hidden_size=32)
    prompt = tf.Sam2PromptEncoderConfig(hidden_size=32, image_size=64, patch_size=16, mask_input_channels=4)
    decoder = tf.Sam2MaskDecoderConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_dim=32,
                                       iou_head_hidden_dim=16)
    torch.manual_seed(0)
    model = tf.Sam2Model(tf.Sam2Config(vision_config=vision, prompt_encoder_config=prompt, mask_decoder_config=decoder))
    model.save_pretrained(folder)
    # the processor's settings written as its save_pretrained writes them (building one needs torchvision)
    (folder / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "Sam2ImageProcessor", "processor_class": "Sam2Processor",
        "size": {"height": 64, "width": 64}, "mask_size": {"height": 16, "width": 16},
        "do_resize": True, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
        "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225], "do_convert_rgb": True}))
    return folder


@pytest.fixture(scope="module")
def sam(tmp_path_factory) -> Path:
    return save_tiny_sam(tmp_path_factory.mktemp("sam"))


def _image() -> np.ndarray:
    return (np.random.default_rng(3).random((48, 80, 3)) * 255).astype(np.uint8)


def test_sam_gives_one_mask_per_box_at_the_image_size(sam: Path) -> None:
    segmenter: Segmenter = HFSegmenter(str(sam), batch_size=2)
    boxes = [(10, 10, 40, 30), (50, 5, 70, 40), (-5, -5, 90, 60)]  # the last reaches outside the image
    masks = segmenter.segment(_image(), boxes, ["dog", "person", "car"])
    assert len(masks) == 3
    assert all(mask.shape == (48, 80) and mask.dtype == bool for mask in masks)
    again = HFSegmenter(str(sam), batch_size=3).segment(_image(), boxes, ["dog", "person", "car"])
    assert all(np.array_equal(a, b) for a, b in zip(masks, again))  # chunks of prompts change nothing
    assert segmenter.segment(_image(), [], []) == []


def test_the_factory_builds_the_segmenter_role(sam: Path) -> None:
    segmenter = build_backend("segmenter", f"hf:{sam}?batch_size=4")
    assert isinstance(segmenter, HFSegmenter) and segmenter.batch_size == 4
    assert segmenter.name == f"hf:{sam}"
    assert build_backend("segmenter", "hf").model == "facebook/sam-vit-base"  # nothing loads until used


def test_sam2_loads_through_the_same_code_or_says_it_needs_torchvision(tmp_path: Path) -> None:
    folder = save_tiny_sam2(tmp_path / "sam2")
    segmenter = HFSegmenter(str(folder))
    boxes = [(10, 10, 40, 30), (50, 5, 70, 40)]
    if importlib.util.find_spec("torchvision") is None:  # as here: SAM 2's image processor is torchvision's
        with pytest.raises(ModelUnavailableError, match="(?i)torchvision"):
            segmenter.segment(_image(), boxes, ["dog", "cat"])
        return
    masks = segmenter.segment(_image(), boxes, ["dog", "cat"])
    assert [mask.shape for mask in masks] == [(48, 80), (48, 80)]


# SAM 2 where its image processor (torchvision's) is installed; without it the test above checks the clear error
SAVERS = [save_tiny_sam] + ([save_tiny_sam2] if importlib.util.find_spec("torchvision") is not None else [])


@pytest.mark.parametrize("save", SAVERS, ids=["sam", "sam2"][: len(SAVERS)])
def test_segment_anything_runs_in_bfloat16_as_on_a_gpu(save, tmp_path: Path) -> None:
    """bfloat16 is what a GPU loads (``dtype=auto``): SAM and SAM 2 give their masks in it too."""
    segmenter = HFSegmenter(str(save(tmp_path / "model")), options=LoadOptions(dtype="bfloat16"))
    masks = segmenter.segment(_image(), [(10, 10, 40, 30), (50, 5, 70, 40)], ["dog", "cat"])
    assert [(mask.shape, mask.dtype) for mask in masks] == [((48, 80), np.dtype(bool))] * 2
