"""Chat backends on real models: the local Qwen2.5 1.5B, and SmolLM2 behind a real HTTP server."""

from __future__ import annotations

import base64
import io
import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from vidagent.config import Settings
from vidagent.errors import LLMError, ModelUnavailableError
from vidagent.llm.base import Completion, Message, Sampling, Usage
from vidagent.llm.cache import ResponseCache, cache_key
from vidagent.llm.client import LLM, build_llm
from vidagent.llm.local import LocalGGUFBackend
from vidagent.llm.openai_compat import OpenAICompatibleBackend, image_data_url
from vidagent.models.install import model_path

from llama_server import installed

MODELS_DIR = Settings.from_env().models_dir


def _installed(name: str) -> Path:
    return installed(name, MODELS_DIR)


@pytest.fixture(scope="module")
def qwen() -> LocalGGUFBackend:
    return LocalGGUFBackend(_installed("qwen2.5-1.5b"), context_tokens=2048)


@pytest.fixture(scope="module")
def smol() -> LocalGGUFBackend:
    return LocalGGUFBackend(_installed("smollm2-135m"), context_tokens=1024)


# --- the local backend -------------------------------------------------------------------------


@pytest.mark.models
def test_local_model_answers_a_trivial_question(qwen: LocalGGUFBackend) -> None:
    c = qwen.complete([Message("system", "You are a terse assistant."),
                       Message("user", "What is 2 + 2? Reply with the number only.")], max_tokens=8)
    assert c.text.strip() == "4"
    assert c.prompt_tokens > 10 and c.completion_tokens > 0
    assert c.seconds > 0 and not c.cached
    assert qwen.load_seconds is not None


@pytest.mark.models
def test_local_model_honours_stop_strings_and_max_tokens(qwen: LocalGGUFBackend) -> None:
    ask = [Message("user", "Count from 1 to 10, separated by commas and spaces. Output only the numbers.")]
    c = qwen.complete(ask, stop=["5"], max_tokens=40)
    assert "3, 4" in c.text and "5" not in c.text and "6" not in c.text
    short = qwen.complete(ask, max_tokens=3)
    assert short.completion_tokens == 3


@pytest.mark.models
def test_local_model_reuses_the_kv_cache_for_a_shared_prefix(qwen: LocalGGUFBackend) -> None:
    facts = "\n".join(f"Segment {i}: a cyclist in a {c} jacket passes a bakery." for i, c in
                      enumerate(["red", "blue", "green", "yellow"] * 6))
    scratch = f"Observations:\n{facts}\nQuestion: which colour comes first? One word.\n"
    first = qwen.complete([Message("user", scratch)], max_tokens=4)
    reused_first = qwen.last_timings.get("cache_n", 0)
    second = qwen.complete([Message("user", scratch + "Thought: look at segment 0.\n")], max_tokens=4)
    reused = qwen.last_timings["cache_n"]
    assert second.prompt_tokens > first.prompt_tokens > 250
    assert reused >= first.prompt_tokens - 8 > reused_first
    assert second.reused_prompt_tokens == reused  # the completion says what it did not read again
    assert second.seconds < first.seconds


@pytest.mark.models
def test_an_unrelated_prompt_between_two_does_not_cost_the_shared_prefix(qwen: LocalGGUFBackend) -> None:
    """A planner's own prompts interleave with a tool's (TraveLER's questions to the visual-QA model,
    PEIL's self-check): llama.cpp keeps the prefix it read in its RAM prompt cache and restores it."""
    facts = "\n".join(f"At {i} s a cook in a {c} apron cuts an onion." for i, c in
                      enumerate(["red", "blue", "green", "white"] * 8))
    planner = f"Information:\n{facts}\nQuestion: what colour is the first apron? One word.\n"
    qwen.complete([Message("user", planner)], max_tokens=2)
    qwen.complete([Message("user", "A different request: name a fruit. One word.")], max_tokens=2)
    again = qwen.complete([Message("user", planner + "Look at second 0 first.\n")], max_tokens=2)
    assert again.reused_prompt_tokens >= again.prompt_tokens - 20


@pytest.mark.models
def test_local_model_reports_context_overflow_as_llm_error(smol: LocalGGUFBackend) -> None:
    with pytest.raises(LLMError, match="context"):
        smol.complete([Message("user", "word " * 1500)], max_tokens=4)


@pytest.mark.models
def test_missing_or_corrupt_model_files(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match="does not exist"):
        LocalGGUFBackend(tmp_path / "absent.gguf").complete([Message("user", "hi")])
    not_gguf = tmp_path / "not.gguf"
    not_gguf.write_bytes(b"PK\x03\x04 definitely a zip")
    with pytest.raises(ModelUnavailableError, match="not a GGUF"):
        LocalGGUFBackend(not_gguf).complete([Message("user", "hi")])
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(b"GGUF" + bytes(range(256)) * 8)
    with pytest.raises(ModelUnavailableError, match="cannot load"):
        LocalGGUFBackend(corrupt).complete([Message("user", "hi")])


@pytest.mark.models
def test_warming_up_loads_the_model_on_a_thread_and_a_failed_load_is_reported_by_the_first_call(tmp_path: Path) -> None:
    backend = LocalGGUFBackend(_installed("smollm2-135m"), context_tokens=1024)
    llm = LLM(backend)
    llm.warm_up()
    llm.warm_up()  # once is enough
    assert llm._warming is not None and llm._warming.name == "llm-warm-up"
    llm._warming.join(timeout=120)
    assert backend.load_seconds is not None and backend._server is not None  # loaded before any call
    assert llm.chat([Message("user", "Say hi.")], max_tokens=4).text
    llm.close()
    absent = LLM(LocalGGUFBackend(tmp_path / "absent.gguf"))
    absent.warm_up()
    with pytest.raises(ModelUnavailableError, match="does not exist"):
        absent.chat([Message("user", "hi")])
    absent.close()


# --- the LLM client and its cache ---------------------------------------------------------------


@pytest.mark.models
def test_llm_cache_hit_on_identical_call(qwen: LocalGGUFBackend, tmp_path: Path) -> None:
    llm = LLM(qwen, ResponseCache(tmp_path / "cache.sqlite"))
    ask = [Message("user", "Name the capital of France in one word.")]
    first = llm.chat(ask, max_tokens=8)
    assert not first.cached and "Paris" in first.text
    again = llm.chat(ask, max_tokens=8)
    assert again.cached and again.text == first.text
    assert (again.prompt_tokens, again.completion_tokens) == (first.prompt_tokens, first.completion_tokens)
    assert again.seconds < 0.05
    # another process (a fresh cache object on the same file) sees it too
    assert LLM(qwen, ResponseCache(tmp_path / "cache.sqlite")).chat(ask, max_tokens=8).cached
    different = llm.chat(ask, max_tokens=9)
    assert not different.cached
    usage = Usage()
    for c in (first, again, different):
        usage.add(c)
    assert usage.llm_calls == 2 and usage.cached_calls == 1


def test_cache_key_covers_images_stop_and_sampling() -> None:
    img = np.zeros((4, 4, 3), np.uint8)
    other = img.copy()
    other[0, 0, 0] = 1
    base = dict(stop=("x",), max_tokens=10, sampling=Sampling(0.0))
    k = cache_key("m", [Message("user", "hi", images=(img,))], **base)
    assert k == cache_key("m", [Message("user", "hi", images=(img.copy(),))], **base)
    assert k != cache_key("m", [Message("user", "hi", images=(other,))], **base)
    assert k != cache_key("m", [Message("user", "hi")], **base)
    assert k != cache_key("m2", [Message("user", "hi", images=(img,))], **base)
    assert k != cache_key("m", [Message("user", "hi", images=(img,))], **{**base, "stop": ()})
    for sampling in (Sampling(0.5), Sampling(0.0, seed=1), Sampling(0.0, n=2), Sampling(0.7, seed=1)):
        assert k != cache_key("m", [Message("user", "hi", images=(img,))], **{**base, "sampling": sampling})
    assert cache_key("m", [Message("user", "hi")], stop=(), max_tokens=1, sampling=Sampling(0.7, seed=1)) != \
        cache_key("m", [Message("user", "hi")], stop=(), max_tokens=1, sampling=Sampling(0.7, seed=2))


@pytest.mark.models
def test_sampling_seeds_draw_distinct_completions_and_each_is_cached(smol: LocalGGUFBackend, tmp_path: Path) -> None:
    llm = LLM(smol, ResponseCache(tmp_path / "cache.sqlite"))
    ask = [Message("user", "Write one short sentence about a dog in a park.")]
    draws = {seed: llm.chat(ask, max_tokens=24, temperature=1.2, seed=seed) for seed in range(4)}
    assert not any(c.cached for c in draws.values())
    assert len({c.text for c in draws.values()}) >= 3  # new seeds, new draws (not one cached reply)
    for seed, first in draws.items():
        again = llm.chat(ask, max_tokens=24, temperature=1.2, seed=seed)
        assert again.cached and again.text == first.text
    several = llm.chat(ask, max_tokens=24, temperature=1.2, seed=10, n=3)
    assert len(several.texts) == 3 and len(set(several.texts)) >= 2
    assert several.texts[0] == llm.chat(ask, max_tokens=24, temperature=1.2, seed=10).text  # draw i uses seed + i
    again = llm.chat(ask, max_tokens=24, temperature=1.2, seed=10, n=3)
    assert again.cached and again.texts == several.texts
    with pytest.raises(LLMError, match="n must be at least 1"):
        llm.chat(ask, n=0)


@pytest.mark.models
def test_first_token_logprobs_come_back_and_are_cached(smol: LocalGGUFBackend, tmp_path: Path) -> None:
    llm = LLM(smol, ResponseCache(tmp_path / "cache.sqlite"))
    ask = [Message("user", "Which is larger, 2 or 7? Reply with the number only.")]
    first = llm.chat(ask, max_tokens=1, top_logprobs=5)
    tokens = [token for token, _ in first.first_token_logprobs]
    values = [value for _, value in first.first_token_logprobs]
    assert len(tokens) == 5 and values == sorted(values, reverse=True) and all(v <= 0 for v in values)
    assert first.text.strip() == tokens[0].strip()  # greedy: the reply's token is the likeliest one
    again = llm.chat(ask, max_tokens=1, top_logprobs=5)
    assert again.cached and again.first_token_logprobs == first.first_token_logprobs
    plain = llm.chat(ask, max_tokens=1)
    assert not plain.cached and plain.first_token_logprobs == ()  # another request: its own cache entry
    with pytest.raises(LLMError, match="top_logprobs"):
        llm.chat(ask, top_logprobs=50)


def test_cache_written_before_several_completions_is_upgraded(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as old:
        old.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, text TEXT NOT NULL, prompt_tokens INTEGER NOT "
                    "NULL, completion_tokens INTEGER NOT NULL, created REAL NOT NULL)")
        old.execute("INSERT INTO responses VALUES ('k', 'old reply', 3, 4, 0)")
    cache = ResponseCache(db)
    hit = cache.get("k")
    assert hit is not None and hit.texts == ("old reply",) and (hit.prompt_tokens, hit.completion_tokens) == (3, 4)
    cache.put("k2", Completion("a", 1, 2, 0.1, others=("b", "c")))
    assert cache.get("k2").texts == ("a", "b", "c")


def test_cache_is_shared_by_concurrent_processes(tmp_path: Path) -> None:
    db = tmp_path / "shared.sqlite"
    ResponseCache(db)
    script = (
        "import sys; from vidagent.llm.cache import ResponseCache; from vidagent.llm.base import Completion\n"
        "c = ResponseCache(sys.argv[1])\n"
        "for i in range(100): c.put(f'{sys.argv[2]}-{i}', Completion('t', 1, 2, 0.1))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(db), tag]) for tag in "ab"]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    cache = ResponseCache(db)
    assert len(cache) == 200
    hit = cache.get("b-99")
    assert hit is not None and (hit.texts, hit.prompt_tokens, hit.completion_tokens) == (("t",), 1, 2)


@pytest.mark.models
def test_build_llm_resolves_local_models(tmp_path: Path) -> None:
    _installed("smollm2-135m")
    settings = Settings(home=MODELS_DIR.parent).with_llm(model="smollm2-135m", cache=False)
    llm = build_llm(settings)
    assert llm.name.startswith("local:") and not llm.supports_images and llm.cache is None
    direct = build_llm(settings.with_llm(model=str(model_path("smollm2-135m", MODELS_DIR))))
    assert direct.backend.model_path == llm.backend.model_path
    with pytest.raises(ModelUnavailableError, match="vidagent models install qwen2.5-0.5b"):
        build_llm(Settings(home=tmp_path).with_llm(model="qwen2.5-0.5b"))
    with pytest.raises(ModelUnavailableError, match="unknown local model"):
        build_llm(Settings(home=tmp_path).with_llm(model="llama-9000"))
    with pytest.raises(LLMError, match="base URL"):
        build_llm(Settings(home=tmp_path).with_llm(backend="openai"))
    remote = build_llm(Settings.from_env({"VIDAGENT_HOME": str(tmp_path),
                                          "VIDAGENT_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                                          "VIDAGENT_LLM_MODEL": "gpt-4o-mini"}))
    assert remote.supports_images and remote.name == "openai:gpt-4o-mini@http://127.0.0.1:9/v1"
    assert remote.cache is not None and remote.cache.path == tmp_path / "llm-cache.sqlite"


# --- the OpenAI-compatible backend against a real HTTP server --------------------------------


class _Handler(BaseHTTPRequestHandler):
    """``/<mode>/v1/chat/completions``: ``ok`` answers with SmolLM2; the others misbehave."""

    backend: LocalGGUFBackend
    requests: list[dict[str, Any]]
    hits: dict[str, int]

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        mode = self.path.strip("/").split("/")[0]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append({"mode": mode, "body": body, "auth": self.headers.get("Authorization")})
        self.hits[mode] = self.hits.get(mode, 0) + 1
        if mode == "slow":
            time.sleep(3)
        if mode == "bad":
            return self._send(200, b"{not json", "application/json")
        if mode == "flaky" and self.hits[mode] == 1:
            return self._send(503, b'{"error": {"message": "warming up"}}', "application/json")
        if mode == "denied":
            return self._send(401, b'{"error": {"message": "invalid api key"}}', "application/json")
        messages = [Message(m["role"], m["content"] if isinstance(m["content"], str) else
                            " ".join(p.get("text", "") for p in m["content"])) for m in body["messages"]]
        c = self.backend.complete(messages, stop=body.get("stop", ()), max_tokens=body["max_tokens"],
                                  sampling=Sampling(body["temperature"], body.get("seed"), body.get("n", 1),
                                                    body.get("top_logprobs", 0) if body.get("logprobs") else 0))
        reply: dict[str, Any] = {"choices": [{"index": i, "message": {"role": "assistant", "content": text}}
                                             for i, text in enumerate(c.texts)]}
        if c.first_token_logprobs:
            token, logprob = c.first_token_logprobs[0]
            reply["choices"][0]["logprobs"] = {"content": [{"token": token, "logprob": logprob, "top_logprobs": [
                {"token": t, "logprob": p} for t, p in c.first_token_logprobs]}]}
        if mode != "nousage":
            reply["usage"] = {"prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                              "prompt_tokens_details": {"cached_tokens": c.reused_prompt_tokens}}
        self._send(200, json.dumps(reply).encode(), "application/json")

    def _send(self, status: int, data: bytes, kind: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            pass


@pytest.fixture(scope="module")
def server(smol: LocalGGUFBackend) -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {"backend": smol, "requests": [], "hits": {}})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.models
def test_openai_backend_talks_to_a_real_server(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    backend = OpenAICompatibleBackend(f"{url}/ok/v1/", "smollm2", api_key="sk-test", timeout_s=60)
    c = backend.complete([Message("user", "Say hello.")], max_tokens=12, stop=["\n\n"])
    assert c.text.strip() and c.prompt_tokens > 0 and 0 < c.completion_tokens <= 12
    again = backend.complete([Message("user", "Say hello.")], max_tokens=12, stop=["\n\n"])
    assert 0 < again.reused_prompt_tokens <= again.prompt_tokens  # the server's prefix cache, as OpenAI reports it
    sent = handler.requests[-1]
    assert sent["auth"] == "Bearer sk-test"
    assert sent["body"]["model"] == "smollm2" and sent["body"]["stop"] == ["\n\n"]
    assert sent["body"]["max_tokens"] == 12 and sent["body"]["temperature"] == 0.0


@pytest.mark.models
def test_openai_backend_sends_images_as_jpeg_data_urls(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    image = np.zeros((32, 48, 3), np.uint8)
    image[:, :24] = (255, 0, 0)
    llm = LLM(OpenAICompatibleBackend(f"{url}/ok/v1", "vision", timeout_s=60))
    assert llm.supports_images
    llm.chat([Message("user", "What colour is the left half?", images=(image,))], max_tokens=4)
    content = handler.requests[-1]["body"]["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "What colour is the left half?"}
    data_url = content[1]["image_url"]["url"]
    assert content[1]["type"] == "image_url" and data_url.startswith("data:image/jpeg;base64,")
    from PIL import Image

    decoded = np.asarray(Image.open(io.BytesIO(base64.b64decode(data_url.split(",", 1)[1]))))
    assert decoded.shape == (32, 48, 3) and decoded[16, 5, 0] > 200 and decoded[16, 40, 0] < 50
    assert image_data_url(image) == data_url


@pytest.mark.models
def test_openai_backend_estimates_usage_when_missing(server: tuple[str, type[_Handler]]) -> None:
    url, _ = server
    c = OpenAICompatibleBackend(f"{url}/nousage/v1", "m", timeout_s=60).complete(
        [Message("user", "Say hi.")], max_tokens=8)
    assert c.prompt_tokens > 0 and c.completion_tokens > 0


@pytest.mark.models
def test_openai_backend_retries_server_errors(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    c = OpenAICompatibleBackend(f"{url}/flaky/v1", "m", timeout_s=60, backoff_s=0.05).complete(
        [Message("user", "Say hi.")], max_tokens=4)
    assert c.text is not None and handler.hits["flaky"] == 2


def test_server_down_is_a_quick_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again on exit: nothing listens there
    backend = OpenAICompatibleBackend(f"http://127.0.0.1:{port}/v1", "m", timeout_s=30)
    started = time.perf_counter()
    with pytest.raises(LLMError) as err:
        backend.complete([Message("user", "hi")])
    assert time.perf_counter() - started < 2
    assert str(err.value) == f"LLM server at http://127.0.0.1:{port}/v1 is not reachable (connection refused)"


@pytest.mark.models
def test_slow_server_times_out(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    backend = OpenAICompatibleBackend(f"{url}/slow/v1", "m", timeout_s=0.5, max_retries=1, backoff_s=0.05)
    started = time.perf_counter()
    with pytest.raises(LLMError, match=r"did not answer within 0.5s .*after 2 attempts"):
        backend.complete([Message("user", "hi")])
    assert time.perf_counter() - started < 2.5
    assert handler.hits["slow"] == 2


@pytest.mark.models
def test_malformed_json_and_http_errors(server: tuple[str, type[_Handler]]) -> None:
    url, _ = server
    with pytest.raises(LLMError, match=r"LLM server at .*/bad/v1 returned malformed JSON"):
        OpenAICompatibleBackend(f"{url}/bad/v1", "m", backoff_s=0.01).complete([Message("user", "hi")])
    with pytest.raises(LLMError, match=r"answered HTTP 401: invalid api key$"):
        OpenAICompatibleBackend(f"{url}/denied/v1", "m").complete([Message("user", "hi")])


@pytest.mark.models
def test_openai_backend_sends_seed_and_n_and_returns_every_choice(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    backend = OpenAICompatibleBackend(f"{url}/ok/v1", "smollm2", timeout_s=60)
    c = backend.complete([Message("user", "Name a colour.")], max_tokens=6,
                         sampling=Sampling(temperature=1.0, seed=7, n=2))
    sent = handler.requests[-1]["body"]
    assert (sent["seed"], sent["n"], sent["temperature"]) == (7, 2, 1.0)
    assert len(c.texts) == 2
    plain = backend.complete([Message("user", "Name a colour.")], max_tokens=6)
    assert "seed" not in handler.requests[-1]["body"] and "n" not in handler.requests[-1]["body"]
    assert "logprobs" not in handler.requests[-1]["body"]
    assert plain.others == () and plain.first_token_logprobs == ()
    scored = backend.complete([Message("user", "Name a colour.")], max_tokens=1, sampling=Sampling(top_logprobs=3))
    sent = handler.requests[-1]["body"]
    assert (sent["logprobs"], sent["top_logprobs"]) == (True, 3)
    assert len(scored.first_token_logprobs) == 3 and scored.first_token_logprobs[0][0].strip() == scored.text.strip()


@pytest.mark.models
def test_a_given_reply_is_scored_in_the_models_own_tokens(qwen: LocalGGUFBackend) -> None:
    """Held to a reply's text alone, llama.cpp spelt " organizing" as " ", "organ", "izing" (-10 to -16 each): the
    score measured the spelling. Held to the ids the model's own tokenizer gives (read from its GGUF file), each
    word is the token the model reads, and the tokenizer agrees with llama.cpp's own count."""
    tokenizer = qwen.reply_tokenizer()
    assert tokenizer is not None
    server = qwen._ensure_loaded()
    for text in ["C is organizing the kitchen by putting items away in the cupboards.", "pick up the ball",
                 "Ça coûte 12,50 € — naïve café!", "don't   stop\n\nnow", "2024-11-27 at 10:30"]:
        ids = tokenizer.encode(text)
        assert tokenizer.decode(ids) == text
        assert server.handle_completions({"prompt": text, "n_predict": 1})["usage"]["prompt_tokens"] == len(ids)
    question = [Message("user", "Describe what C does in the video in one sentence.")]
    text = "C is organizing the kitchen by putting items away in the cupboards."
    scored = qwen.complete(question, continuation=text)
    assert scored.text == text and len(scored.token_logprobs) == len(tokenizer.encode(text)) + 1  # and the end
    capital = [Message("user", "What is the capital of France? Answer with the city's name only.")]
    paris, banana = (qwen.complete(capital, continuation=reply).token_logprobs for reply in ("Paris", "Banana"))
    assert sum(paris) / len(paris) > sum(banana) / len(banana) + 3


@pytest.mark.models
def test_options_that_begin_alike_are_scored_reading_their_shared_start_once(qwen: LocalGGUFBackend) -> None:
    """Scored one after another after the same messages, an option forces only the tokens it does not share with
    the option before (the shared start is written as the reply's beginning and read from the KV cache); each
    token's log-probability is the one it has when the option is scored alone."""
    question = [Message("user", "A person (C) wipes a counter, rinses a sponge and wipes again. What is C doing?")]
    options = sorted(["C is cleaning the kitchen counter.", "C is cleaning the bathroom sink.", "C is cooking."])
    tokenizer = qwen.reply_tokenizer()
    assert tokenizer is not None
    # the prompt read once first: a token read in the prompt's batch and one read after it cached differ by up to
    # ~0.1 in log-probability (batch and single-token arithmetic), so both sides read the options after it cached
    qwen.complete(question, continuation="Nothing.")
    alone = []
    for option in options:
        qwen.complete(question, continuation="Nothing.")  # a reply that shares no start with any option between
        alone.append(qwen.complete(question, continuation=option))
    together = [qwen.complete(question, continuation=option) for option in options]
    for option, single, shared in zip(options, alone, together):
        assert shared.text == option and len(shared.token_logprobs) == len(tokenizer.encode(option)) + 1
        assert shared.token_logprobs == pytest.approx(single.token_logprobs, abs=0.01)
    forced = [completion.completion_tokens for completion in together]
    assert forced[1] < len(alone[1].token_logprobs) - 2  # "C is cleaning the" was read, not forced again
    assert forced[2] < len(alone[2].token_logprobs)


class _WordTokenizer:
    """Words and the spaces before them as tokens (``ReplyTokenizer``'s two methods), for ``ScoredReply``'s logic;
    the real tokenizer's case is the models-tier test above."""

    def __init__(self) -> None:
        self.vocabulary: dict[str, int] = {}

    def encode(self, text: str) -> list[int]:
        import re

        return [self.vocabulary.setdefault(piece, len(self.vocabulary)) for piece in re.findall(r" ?\S+", text)]

    def decode(self, ids) -> str:
        pieces = {index: piece for piece, index in self.vocabulary.items()}
        return "".join(pieces[i] for i in ids)


def test_a_scored_reply_shares_whole_tokens_after_the_same_messages_and_forces_one_at_least() -> None:
    from vidagent.llm.local import ScoredReply

    tokenizer = _WordTokenizer()
    messages = [{"role": "user", "content": "What is C doing?"}]
    first = tokenizer.encode("C is cleaning the kitchen.")
    scored = ScoredReply(messages, tuple(first), (-0.1, -0.2, -0.3, -0.4, -0.5, -0.6))  # and the end token's
    shared = scored.shared_with(messages, tokenizer.encode("C is cleaning the sink."), tokenizer)  # type: ignore[arg-type]
    assert shared is not None and shared.text == "C is cleaning the" and shared.logprobs == (-0.1, -0.2, -0.3, -0.4)
    assert scored.shared_with(messages, tokenizer.encode("He is cleaning."), tokenizer) is None  # type: ignore[arg-type]
    other = [{"role": "user", "content": "What is D doing?"}]
    assert scored.shared_with(other, tokenizer.encode("C is cleaning the sink."), tokenizer) is None  # type: ignore[arg-type]
    # an option that is the start of the one before keeps its last token to force
    shorter = scored.shared_with(messages, tokenizer.encode("C is cleaning"), tokenizer)  # type: ignore[arg-type]
    assert shorter is not None and shorter.text == "C is"
    assert ScoredReply().shared_with(messages, first, tokenizer) is None  # type: ignore[arg-type]
    assert scored.shared_with(messages, tokenizer.encode("C is cleaning the sink."), None) is None
