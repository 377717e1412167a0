"""Vision chat models as the captioner and the VQA (vidagent.perception.chat_vision) against a real HTTP server
on loopback that checks each request's image parts; the frames stage grouping a segment's frames into one
request; specs, keys and bad input; the local GGUF path (llama.cpp in-process) with a tiny random vision model
(tiny_gguf_vlm.py): a segment described, a wrong projector and a missing one refused."""

from __future__ import annotations

import base64
import io
import json
import logging
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from vidagent.config import Settings
from vidagent.errors import ModelUnavailableError
from vidagent.memory.builder import MemoryBuilder
from vidagent.memory.store import Library
from vidagent.perception.backends import build_backend
from vidagent.perception.base import VQAResult
from vidagent.perception.chat_vision import ChatCaptioner, ChatVisualQA
from vidagent.perception.describer import CaptionWithText
from vidagent.perception.vision_chat import EndpointVisionChat, GGUFVisionChat, ReplyCache
from vidagent.video.video import SampledFrame, Video

from fakes.library import fake_settings
from fakes.perception import FakeClip, Scene, ScriptedReader, _Script, scripted_perception, write_clip
from fault_llm import Fault, FaultServer


def images_of(request: dict) -> list[Image.Image]:
    """The images of a chat request, decoded (each must be a JPEG data URL)."""
    found = []
    for message in request["messages"]:
        for part in message["content"] if isinstance(message["content"], list) else ():
            if part["type"] == "image_url":
                url = part["image_url"]["url"]
                assert url.startswith("data:image/jpeg;base64,")
                data = base64.b64decode(url.split(",", 1)[1])
                assert data[:3] == b"\xff\xd8\xff"  # JPEG
                found.append(Image.open(io.BytesIO(data)))
    return found


def frames(count: int, height: int = 2160, width: int = 3840, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 255, (height, width, 3), dtype=np.uint8) for _ in range(count)]


def captioner(server: FaultServer, tmp_path, **options) -> ChatCaptioner:
    return ChatCaptioner(EndpointVisionChat(server.base_url, "vlm-test", concurrency=options.pop("concurrency", 4),
                                            backoff_s=0.01), cache=ReplyCache(tmp_path / "cache.sqlite"), **options)


def test_a_segment_is_described_from_its_frames_in_one_request_scaled_down_and_cached(tmp_path):
    with FaultServer(reply="A man cuts a carrot on a board.") as server:
        model = captioner(server, tmp_path, frames_per_request=4, max_side=512)
        described = model.describe_groups([frames(4, seed=1), frames(4, seed=2)])  # two segments of 4K frames
        assert [len(group) for group in described] == [4, 4]
        assert {d.caption for group in described for d in group} == {"A man cuts a carrot on a board."}
        assert len(server.requests) == 2
        for request in server.requests:
            pictures = images_of(request)
            assert len(pictures) == 4 and all(max(p.size) == 512 for p in pictures)  # 3840x2160 -> 512x288
            assert "4 images are frames" in request["messages"][0]["content"][0]["text"]
            assert request["model"] == "vlm-test"
        assert model.usage.snapshot()["requests"] == 2
        again = model.describe_groups([frames(4, seed=1)])  # the same frames: from the cache, no request
        assert again[0][0].caption == "A man cuts a carrot on a board." and len(server.requests) == 2
        assert model.usage.snapshot()["cached"] == 1


def test_rate_limits_and_server_errors_are_retried_and_a_refused_image_is_a_clear_error(tmp_path):
    with FaultServer(reply="A dog runs.", faults=[Fault("status", 429, retry_after=0), Fault("status", 503)]) as server:
        model = captioner(server, tmp_path, concurrency=1)
        assert model.describe([frames(1, 64, 64)[0]])[0].caption == "A dog runs."
        assert len(server.requests) == 3
    refusing = Fault("status", 400, text="")
    with FaultServer(default=refusing) as server:
        with pytest.raises(ModelUnavailableError, match=r"vision model server at http://127\.0\.0\.1.*HTTP 400"):
            captioner(server, tmp_path / "b", concurrency=1).describe(frames(1, 64, 64))
        assert len(server.requests) == 1  # a 400 is not retried


def test_an_empty_reply_leaves_the_segment_without_a_caption_and_is_not_cached(tmp_path, caplog):
    with FaultServer(reply="") as server:
        model = captioner(server, tmp_path, concurrency=1)
        with caplog.at_level(logging.WARNING):
            assert model.describe(frames(1, 64, 64))[0].caption == ""
        assert "empty caption" in caplog.text
        model.describe(frames(1, 64, 64))
        assert len(server.requests) == 2  # asked again: an empty reply is not kept


def test_requests_run_concurrently_within_the_bound(tmp_path):
    import threading
    import time

    lock, active, peak = threading.Lock(), [0], [0]

    def slow(messages):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.1)
        with lock:
            active[0] -= 1
        return "A cat sleeps."

    with FaultServer(reply=slow) as server:
        model = captioner(server, tmp_path, concurrency=3, frames_per_request=1)
        model.describe(frames(9, 32, 32, seed=5))
    assert peak[0] == 3


def test_the_vqa_sends_the_question_and_frames_to_its_own_model_and_splits_the_reply(tmp_path):
    reply = "Description: a woman holds a red cup.\nAnswer: red"
    with FaultServer(reply=reply) as server:
        vqa = ChatVisualQA(EndpointVisionChat(server.base_url, "vlm-qa"), max_frames=2)
        shots = [SampledFrame(t, image) for t, image in zip([0.5, 1.0, 1.5, 2.0], frames(4, 48, 64))]
        result = vqa.answer("What colour is the cup?", shots)
        assert (result.description, result.answer) == ("a woman holds a red cup.", "red")
        request = server.requests[0]
        assert len(images_of(request)) == 2 and "What colour is the cup?" in json.dumps(request)
    assert VQAResult.from_reply("just red") == VQAResult("", "just red")


def test_specs_keys_and_the_base_url_come_from_settings_and_bad_specs_are_refused(tmp_path):
    settings = Settings.from_env({"VIDAGENT_HOME": str(tmp_path), "VIDAGENT_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                                  "VIDAGENT_LLM_API_KEY": "llm-key", "VIDAGENT_CAPTIONER_API_KEY": "cap-key",
                                  "VIDAGENT_CAPTIONER": "openai:qwen2.5vl?concurrency=8&frames=3"})
    model = build_backend("captioner", settings.backends.captioner, settings)
    assert model.frames_per_request == 3 and model.concurrency == 8
    assert model.name.startswith("vlm:openai:qwen2.5vl?frames=3&max_side=512&prompt=")
    chat = model._asking.chat
    assert chat.endpoint.base_url == "http://127.0.0.1:9/v1"  # the LLM's endpoint where the spec names none
    assert chat.endpoint._headers["Authorization"] == "Bearer cap-key"
    assert "cap-key" not in json.dumps(settings.answer_settings()) and "cap-key" not in repr(settings)
    vqa = build_backend("vqa", "openai:vlm?base_url=http://127.0.0.1:9/v1", settings)
    assert vqa._asking.chat.endpoint._headers["Authorization"] == "Bearer llm-key"  # no VQA key: the LLM's
    bare = Settings.from_env({"VIDAGENT_HOME": str(tmp_path)})
    for spec, message in [("openai:vlm", "needs an endpoint"), ("gguf:/m.gguf", "needs its projector"),
                          ("openai:vlm?base_url=x&colour=red", "unknown option"), ("openai?base_url=x", "needs a model"),
                          ("openai:vlm?base_url=x&concurrency=0", "outside 1..256"),
                          ("openai:vlm?base_url=x&frames=two", "not a int")]:
        with pytest.raises(ModelUnavailableError, match=message):
            build_backend("captioner", spec, bare)
    with pytest.raises(ModelUnavailableError, match="not be the detector"):
        build_backend("detector", "openai:vlm?base_url=x", bare)


def test_a_gguf_model_without_its_files_or_with_a_projector_that_is_not_gguf_says_so(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(ModelUnavailableError, match="projector .*does not exist"):
        GGUFVisionChat(model, tmp_path / "missing.gguf").ask("x", [], max_tokens=4)
    projector = tmp_path / "mmproj.bin"
    projector.write_bytes(b"not a gguf file")
    with pytest.raises(ModelUnavailableError, match="projector .*is not a GGUF file"):
        GGUFVisionChat(model, projector).ask("x", [], max_tokens=4)


def test_the_frames_stage_sends_each_segment_in_one_request_and_the_memory_says_who_wrote_it(tmp_path):
    clip = FakeClip("vlm", [Scene("a red room", seconds=4.0, text=("EXIT",)), Scene("a blue room", seconds=2.0)], fps=5)
    video = Video(write_clip(clip, tmp_path / "videos"))
    seen = {}
    script = _Script((clip,))

    def reply(messages):  # the model "sees" the scene each frame shows (the scripted clip's colours tell it)
        pictures = images_of({"messages": messages})
        seen[len(pictures)] = seen.get(len(pictures), 0) + 1
        scenes = {script.scene(np.asarray(picture))[1].description for picture in pictures}
        return " and ".join(sorted(scenes)).capitalize() + "."

    with FaultServer(reply=reply) as server:
        model = captioner(server, tmp_path, frames_per_request=4)
        perception = scripted_perception(clip)
        describer = CaptionWithText(model, ScriptedReader(script))
        perception = replace(perception, describer=describer, captioner=model)
        settings = fake_settings(tmp_path / "home")
        with Library(tmp_path / "home" / "library.sqlite") as library:
            memory = MemoryBuilder(library, perception, settings).build(video, ("frames", "segments"), progress=False)
            assert seen == {4: 3}  # three 2-s segments, each one request with its 4 frames
            assert [s.description for s in memory.segments] == ["A red room.", "A red room.", "A blue room."]
            assert model.name in library.describer(video.content_hash).describer
            assert [text for _, _, text in library.text_in_frames(video.content_hash)] == ["EXIT", "EXIT"]


@pytest.mark.models
def test_vidagent_index_writes_the_endpoint_s_captions_meters_them_and_a_second_library_reads_the_cache(
        tmp_path, monkeypatch, models_dir):
    """The CLI end to end on a real clip with the real OCR, speech and text models: each 2-s segment is one
    request with 4 frames; ``--json`` reports the requests; another library over the same home pays none."""
    from conftest import video_path
    from test_cli import run_cli

    clip = video_path("github_LLaMA-Factory/4.mp4")  # 5 s: three segments (0-2, 2-4, 4-5 s)

    def reply(messages):
        return f"A drawing made from {len(images_of({'messages': messages}))} frames."

    with FaultServer(reply=reply) as server:
        monkeypatch.setenv("VIDAGENT_CAPTIONER", f"openai:vlm-test?base_url={server.base_url}&price_in=1&price_out=2")
        first = run_cli("index", "--json", "-q", "--stage", "segments", str(clip), home=tmp_path, models_dir=models_dir)
        assert first.returncode == 0, first.stderr
        record = json.loads(first.stdout.strip().splitlines()[-1])
        usage = record["usage"]["captioner"]
        assert record["status"] == "built" and record["segments"] == 3
        assert usage["requests"] == 3 == len(server.requests) and usage["cached"] == 0
        assert usage["cost"] == pytest.approx((usage["prompt_tokens"] * 1 + usage["completion_tokens"] * 2) / 1e6)
        assert all(len(images_of(request)) == 4 for request in server.requests)
        with Library(tmp_path / "library.sqlite") as library:
            descriptions = {s.description for s in library.segments(Video(clip).content_hash)}
        assert descriptions == {"A drawing made from 4 frames."}
        monkeypatch.setenv("VIDAGENT_LIBRARY", str(tmp_path / "other.sqlite"))
        second = run_cli("index", "--json", "-q", "--stage", "segments", str(clip), home=tmp_path, models_dir=models_dir)
        assert second.returncode == 0, second.stderr
        again = json.loads(second.stdout.strip().splitlines()[-1])["usage"]["captioner"]
        assert again["requests"] == 0 and again["cached"] == 3 and len(server.requests) == 3


# The local GGUF path (GGUFVisionChat: llama.cpp's mtmd through xllamacpp, in-process) with a tiny vision model of
# random weights written here (tests/perception/tiny_gguf_vlm.py): a qwen2 language model of hidden size 64 and an
# LLaVA-style ``mlp`` projector whose 32x32 images are 4 tokens each. It writes gibberish, but it loads, reads
# images and answers like a real one, and a projector made for another model is refused.

@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory, models_dir):
    """The tiny model's files; the tokenizer comes from an installed Qwen2.5 chat model (its weights are not read)."""
    from tiny_gguf_vlm import write_tiny_vlm

    from vidagent.models.registry import LOCAL_CHAT_MODELS

    sources = [models_dir / LOCAL_CHAT_MODELS[name].filename for name in ("qwen2.5-1.5b", "qwen2.5-0.5b")]
    source = next((path for path in sources if path.is_file()), None)
    if source is None:
        pytest.skip("no Qwen2.5 GGUF to take the tokenizer from (run `vidagent models install`)")
    return write_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm"), source)


@pytest.mark.models
def test_a_local_gguf_vision_model_describes_a_segment_from_its_frames_in_one_request(tiny_vlm):
    import time

    from tiny_gguf_vlm import IMAGE_SIZE, PATCH_SIZE

    from vidagent.perception.base import FrameDescription

    chat = GGUFVisionChat(tiny_vlm.model, tiny_vlm.projector, threads=1)
    model = ChatCaptioner(chat, frames_per_request=2)
    try:
        started = time.perf_counter()
        instruction = model._instruction.render(count="2")
        text_only = chat.ask(instruction, [], max_tokens=1)  # loads the model and the projector
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        described = model.describe_groups([frames(2, 240, 320, seed=7)])
        seconds = time.perf_counter() - started
    finally:
        model.close()
    assert [len(group) for group in described] == [2]
    assert all(isinstance(d, FrameDescription) and isinstance(d.caption, str) and d.size == (320, 240)
               for d in described[0])
    assert described[0][0].caption == described[0][1].caption  # one caption for the segment
    usage = model.usage.snapshot()
    assert usage["requests"] == 1 and usage["cached"] == 0
    # both frames reached the model: each is (32/16)^2 = 4 image tokens in the prompt beside the same instruction
    assert usage["prompt_tokens"] == text_only.prompt_tokens + 2 * (IMAGE_SIZE // PATCH_SIZE) ** 2
    print(f"\nGGUF vision path, tiny random model, 1 thread: load {loaded:.2f} s; {seconds / 2:.3f} s per frame "
          f"(2 frames, {usage['completion_tokens']:.0f} tokens written): {described[0][0].caption[:60]!r}")


@pytest.mark.models
def test_a_projector_made_for_another_model_is_refused_with_a_model_error(tiny_vlm, tmp_path):
    """mtmd refuses a projector whose image tokens are not the size of the model's (here 80 against 64): a
    ModelUnavailableError, not a crash of the process."""
    from tiny_gguf_vlm import TEXT_HIDDEN, write_projector

    wrong = write_projector(tmp_path / "other-mmproj.gguf", projection_dim=TEXT_HIDDEN + 16)
    model = ChatCaptioner(GGUFVisionChat(tiny_vlm.model, wrong, threads=1), frames_per_request=2)
    with pytest.raises(ModelUnavailableError, match=r"cannot load the vision model tiny-qwen2\.gguf with the "
                                                    r"projector other-mmproj\.gguf"):
        model.describe_groups([frames(2, 48, 64)])
    model.close()


@pytest.mark.models
def test_a_model_without_a_projector_is_refused_with_a_model_error(tiny_vlm):
    """The language model given as its own projector (a GGUF file, but no vision encoder in it)."""
    model = ChatCaptioner(GGUFVisionChat(tiny_vlm.model, tiny_vlm.model, threads=1), frames_per_request=2)
    with pytest.raises(ModelUnavailableError, match=r"with the projector tiny-qwen2\.gguf"):
        model.describe_groups([frames(2, 48, 64)])
    model.close()


def test_a_vision_server_whose_reply_never_ends_stops_the_index_cleanly_and_it_resumes(tmp_path):
    """Issue 55: an endless reply is cut at the reply cap with a clear model error; the library keeps no half
    stage, and the same build with a sane server completes."""
    clip = FakeClip("endless", [Scene("a red room", seconds=4.0), Scene("a blue room", seconds=2.0)], fps=5)
    video = Video(write_clip(clip, tmp_path / "videos"))
    settings = fake_settings(tmp_path / "home")

    def build(server: FaultServer):
        model = captioner(server, tmp_path, frames_per_request=4, concurrency=1)
        perception = replace(scripted_perception(clip), describer=CaptionWithText(model, ScriptedReader(_Script((clip,)))),
                             captioner=model)
        with Library(tmp_path / "home" / "library.sqlite") as library:
            memory = MemoryBuilder(library, perception, settings).build(video, ("frames", "segments"), progress=False)
            return [segment.description for segment in memory.segments]

    with FaultServer(reply="A room.", faults=[Fault("ok")], default=Fault("endless")) as server:
        with pytest.raises(ModelUnavailableError, match="sent a reply of more than the 8 MB a reply may have"):
            build(server)
    with Library(tmp_path / "home" / "library.sqlite") as library:
        assert not library.stage_names(video.content_hash)  # nothing half-written
    with FaultServer(reply="A room.") as server:
        assert build(server) == ["A room."] * 3
