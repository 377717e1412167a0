"""Tiny, randomly initialised Hugging Face checkpoints for testing vidagent's HF loading code offline.

Each ``save_*`` builds a model from a config with tiny sizes (no pretrained backbone is fetched: every
backbone here is a transformers-native config), a processor from locally built tokenizers and image
processors with small input sizes, and writes both with ``save_pretrained`` into a folder, exactly as
a downloaded checkpoint is laid out. Weights are seeded, so outputs are reproducible.
"""

from __future__ import annotations

from pathlib import Path

import torch
import transformers as tf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

WORDS = (
    "a an the dog cat person man woman child ball car grass field street room table cup box "
    "is are on in at with of and to running sitting playing walking holding red brown black "
    "white green blue yes no two one three what where who how many color colour frame video "
    "question answer description describe : . , ?"
).split()
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[DEC]"]

# A minimal chat template of the kind VLM processors carry (images as placeholders in a user turn).
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: "
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image> {% else %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %} </s> {% endfor %}{% if add_generation_prompt %}assistant : {% endif %}"
)


def _bert_tokenizer() -> tf.BertTokenizer:
    vocab = {token: index for index, token in enumerate(BERT_SPECIALS + WORDS)}
    return tf.BertTokenizer(vocab=vocab, bos_token="[DEC]")


def _small_vision(**extra: object) -> dict[str, object]:
    return dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                image_size=32, patch_size=8, **extra)


def save_blip(folder: Path, *, head: str) -> Path:
    """BLIP with a captioning head (``head="caption"``) or a VQA head (``head="vqa"``)."""
    tokenizer = _bert_tokenizer()
    processor = tf.BlipProcessor(image_processor=tf.BlipImageProcessor(size={"height": 32, "width": 32}),
                                 tokenizer=tokenizer)
    config = tf.BlipConfig(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=64, bos_token_id=tokenizer.bos_token_id,
                         pad_token_id=tokenizer.pad_token_id, sep_token_id=tokenizer.sep_token_id),
        vision_config=_small_vision(), projection_dim=16, image_text_hidden_size=16,
    )
    torch.manual_seed(1)
    model = (tf.BlipForConditionalGeneration if head == "caption" else tf.BlipForQuestionAnswering)(config)
    return _save(folder, model, processor)


def save_llava(folder: Path) -> Path:
    """A LLaVA-style chat VLM: tiny CLIP vision tower + tiny Llama, with a chat template."""
    specials = ["<unk>", "<s>", "</s>", "<pad>", "<image>"]
    vocab = {token: index for index, token in enumerate(specials + WORDS + ["user", "assistant"])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.decoder = decoders.WordPiece()
    tokenizer = tf.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>",
                                           eos_token="</s>", pad_token="<pad>",
                                           extra_special_tokens={"image_token": "<image>"})
    image_processor = tf.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = tf.LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=8,
                                  vision_feature_select_strategy="default", chat_template=CHAT_TEMPLATE,
                                  image_token="<image>", num_additional_image_tokens=1)
    config = tf.LlavaConfig(
        vision_config=tf.CLIPVisionConfig(**_small_vision()),
        text_config=tf.LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                                   bos_token_id=1, eos_token_id=2, pad_token_id=3),
        image_token_index=vocab["<image>"], vision_feature_layer=-1, vision_feature_select_strategy="default",
    )
    torch.manual_seed(2)
    return _save(folder, tf.LlavaForConditionalGeneration(config), processor)


def save_rtdetr(folder: Path, labels: tuple[str, ...]) -> Path:
    """RT-DETR with a tiny native ResNet backbone (no timm, no pretrained download)."""
    config = tf.RTDetrConfig(
        backbone_config=tf.RTDetrResNetConfig(embedding_size=8, hidden_sizes=[8, 8, 16, 16], depths=[1, 1, 1, 1],
                                              out_features=["stage2", "stage3", "stage4"]),
        encoder_hidden_dim=16, encoder_in_channels=[8, 16, 16], d_model=16, decoder_in_channels=[16, 16, 16],
        encoder_layers=1, decoder_layers=1, encoder_ffn_dim=32, decoder_ffn_dim=32, encoder_attention_heads=2,
        decoder_attention_heads=2, num_feature_levels=3, num_queries=20, num_denoising=0, anchor_image_size=None,
        id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)},
    )
    torch.manual_seed(3)
    return _save(folder, tf.RTDetrForObjectDetection(config), tf.RTDetrImageProcessor(size={"height": 64, "width": 64}))


def save_detr(folder: Path, labels: tuple[str, ...]) -> Path:
    """DETR with a tiny native ResNet backbone."""
    config = tf.DetrConfig(
        backbone_config=tf.ResNetConfig(embedding_size=8, hidden_sizes=[8, 8, 16, 16], depths=[1, 1, 1, 1],
                                        out_features=["stage4"]),
        d_model=16, encoder_layers=1, decoder_layers=1, encoder_ffn_dim=32, decoder_ffn_dim=32,
        encoder_attention_heads=2, decoder_attention_heads=2, num_queries=10,
        id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)},
    )
    torch.manual_seed(4)
    processor = tf.DetrImageProcessor(size={"shortest_edge": 64, "longest_edge": 96})
    return _save(folder, tf.DetrForObjectDetection(config), processor)


def save_grounding_dino(folder: Path) -> Path:
    """Grounding DINO with a tiny Swin backbone and a tiny BERT text encoder."""
    tokenizer = _bert_tokenizer()
    processor = tf.GroundingDinoProcessor(
        image_processor=tf.GroundingDinoImageProcessor(size={"shortest_edge": 64, "longest_edge": 96}),
        tokenizer=tokenizer)
    config = tf.GroundingDinoConfig(
        backbone_config=tf.SwinConfig(image_size=64, patch_size=4, embed_dim=8, depths=[1, 1, 1, 1],
                                      num_heads=[1, 1, 2, 2], window_size=4,
                                      out_features=["stage2", "stage3", "stage4"]),
        text_config=dict(model_type="bert", vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=32, max_position_embeddings=64),
        d_model=32, encoder_layers=1, decoder_layers=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
        encoder_attention_heads=2, decoder_attention_heads=2, num_queries=30, num_feature_levels=3,
        max_text_len=24, encoder_n_points=2, decoder_n_points=2,
    )
    torch.manual_seed(5)
    return _save(folder, tf.GroundingDinoForObjectDetection(config), processor)


def char_clip_tokenizer() -> tf.CLIPTokenizer:
    """CLIP's tokenizer over a character-level vocabulary (no merges): lower-case words, no download."""
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for char in "abcdefghijklmnopqrstuvwxyz":
        vocab[char] = len(vocab)
        vocab[char + "</w>"] = len(vocab)
    return tf.CLIPTokenizer(vocab=vocab, merges=[])


def char_clip_text_config(vocab_size: int) -> dict[str, object]:
    """The text tower of a tiny CLIP-like model over ``char_clip_tokenizer``'s vocabulary."""
    return dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=32, bos_token_id=0, eos_token_id=1, pad_token_id=1)


def save_clip(folder: Path) -> Path:
    """CLIP with a character-level BPE tokenizer (no merges)."""
    tokenizer = char_clip_tokenizer()
    vocab = tokenizer.get_vocab()
    image_processor = tf.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    config = tf.CLIPConfig(
        text_config=char_clip_text_config(len(vocab)), vision_config=_small_vision(), projection_dim=24,
    )
    torch.manual_seed(6)
    return _save(folder, tf.CLIPModel(config), tf.CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer))


def save_siglip(folder: Path) -> Path:
    """SigLIP (its text tower pools the last position, so text padding changes its output)."""
    vocab = {token: index for index, token in enumerate(["<pad>", "</s>", "<unk>"] + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = tf.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="</s>",
                                           pad_token="<pad>")
    config = tf.SiglipConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=64, pad_token_id=0, eos_token_id=1,
                         bos_token_id=None),
        vision_config=_small_vision(),
    )
    torch.manual_seed(8)
    processor = tf.SiglipProcessor(image_processor=tf.SiglipImageProcessor(size={"height": 32, "width": 32}),
                                   tokenizer=tokenizer)
    return _save(folder, tf.SiglipModel(config), processor)


def save_dinov2(folder: Path) -> Path:
    config = tf.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                             image_size=32, patch_size=8)
    torch.manual_seed(7)
    processor = tf.BitImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    return _save(folder, tf.Dinov2Model(config), processor)


def _save(folder: Path, model: tf.PreTrainedModel, processor: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)  # type: ignore[attr-defined]
    return folder
