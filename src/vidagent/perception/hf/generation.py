"""Running a generative image-text model (BLIP, BLIP-2, LLaVA, Qwen2-VL, ...): images + prompts -> text.

Two prompt styles exist among these models:

* **plain**: the processor takes the image and, optionally, a text prefix (BLIP's "a picture of",
  BLIP-2's "Question: ... Answer:"); one image per prompt.
* **chat**: the processor has a chat template (LLaVA, Qwen2-VL, SmolVLM, ...); the prompt is a user
  turn holding image placeholders and an instruction, rendered by the template; several images may
  go with one prompt. Decoder-only models need left padding to generate a batch.

Decoding is greedy (or beam search) so the same frames always give the same text. Only the newly
generated text is returned: decoder-only models echo their prompt tokens, which are cut off; BLIP
echoes its text prefix, which is removed from the decoded text.

The processor's outputs reach ``generate`` through ``LoadedModel.encode`` (on the model's device and
dtype); the generated tokens come back to the CPU before they are compared with the prompt and decoded.
"""

from __future__ import annotations

from typing import Any, Sequence

from PIL import Image

from vidagent.perception.hf.loading import LoadedModel, inference, require_torch


def has_chat_template(processor: Any) -> bool:
    """Whether the processor renders chat messages (instruction-tuned VLMs) rather than plain text."""
    return bool(getattr(processor, "chat_template", None))


def chat_prompt(processor: Any, instruction: str, image_count: int) -> str:
    """One user turn with ``image_count`` image placeholders then ``instruction``, ready to generate."""
    content: list[dict[str, str]] = [{"type": "image"} for _ in range(image_count)]
    content.append({"type": "text", "text": instruction})
    messages = [{"role": "user", "content": content}]
    return processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def use_left_padding(loaded: LoadedModel) -> None:
    """Pad prompts on the left, as batched generation with a decoder-only model needs."""
    tokenizer = getattr(loaded.processor, "tokenizer", None)
    if tokenizer is not None:
        tokenizer.padding_side = "left"


def generate(
    loaded: LoadedModel,
    images: Sequence[Sequence[Image.Image]],
    prompts: Sequence[str] | None,
    *,
    max_new_tokens: int,
    num_beams: int = 1,
) -> list[str]:
    """Generate one text per group of images: ``images[i]`` goes with ``prompts[i]``.

    Plain-style models take one image per group and ``prompts`` may be None (unconditional
    captioning). Chat prompts hold one image placeholder per image of their group; the groups are
    handed to the processor nested, as multi-image processors (Idefics3, SmolVLM) require.
    """
    torch = require_torch()
    processor = loaded.processor
    if prompts is not None and len(prompts) != len(images):
        raise ValueError(f"{len(prompts)} prompts for {len(images)} image groups")
    chat = has_chat_template(processor)
    if not chat and any(len(group) != 1 for group in images):
        raise ValueError("a model without a chat template takes exactly one image per prompt")
    pixels: list[Any] = [list(group) for group in images] if chat else [group[0] for group in images]
    kwargs: dict[str, Any] = {"images": pixels, "return_tensors": "pt"}
    if prompts is not None:
        kwargs["text"] = list(prompts)
        kwargs["padding"] = True
    inputs = loaded.encode(**kwargs)
    with inference():
        output = loaded.model.generate(
            **inputs, max_new_tokens=max_new_tokens, num_beams=num_beams, do_sample=False
        ).cpu()
    tokenizer = getattr(processor, "tokenizer", processor)
    input_ids = inputs["input_ids"].cpu() if "input_ids" in inputs else None
    if input_ids is not None and output.shape[1] >= input_ids.shape[1] and torch.equal(
        output[:, : input_ids.shape[1]], input_ids
    ):  # a decoder-only model: the output starts with the prompt's tokens
        new_tokens = output[:, input_ids.shape[1]:]
        return [text.strip() for text in tokenizer.batch_decode(new_tokens, skip_special_tokens=True)]
    texts = [text.strip() for text in tokenizer.batch_decode(output, skip_special_tokens=True)]
    if input_ids is None:
        return texts
    echoed = [text.strip() for text in tokenizer.batch_decode(input_ids, skip_special_tokens=True)]
    return [_strip_prefix(text, prefix) for text, prefix in zip(texts, echoed)]


def _strip_prefix(text: str, prefix: str) -> str:
    if prefix and text.lower().startswith(prefix.lower()):
        return text[len(prefix):].strip()
    return text
