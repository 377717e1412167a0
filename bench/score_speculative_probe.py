"""Probe: does llama.cpp's prompt-lookup speculation (ngram-simple) speed up forced-option scoring and keep the
same per-token log-probabilities? Scores the same options with the current request (LocalLLM._score's shape)
on an engine without and with speculation, side by side. Usage: python bench/score_speculative_probe.py MODEL.gguf
[--match N] (the n-gram length a draft must match: llama.cpp's default 12 drafts almost nothing here; 2-3 draft the
options listed in the prompt, whose accepted tokens then come back with wrong log-probabilities)"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import xllamacpp

from vidagent.llm.base import token_logprobs
from vidagent.llm.gguf_tokenizer import load_reply_tokenizer, token_grammar

OPTIONS = ["C is cleaning the kitchen counter with a sponge and then rinses it.",
           "C is cooking a meal on the stove while stirring a pot of soup.",
           "C is washing dishes in the sink and drying them with a towel.",
           "C is organizing the shelves in the pantry by moving jars around.",
           "C is reading a recipe book and preparing ingredients on a board."]
PROMPT = ("A video shows a person (C) in a kitchen wiping surfaces, rinsing a sponge, and wiping again.\n"
          "What is C mainly doing?\n" + "\n".join(f"{i}. {o}" for i, o in enumerate(OPTIONS)))


def engine(path: str, speculate: bool, match: int = 12):
    p = xllamacpp.CommonParams()
    p.model.path = path
    p.n_ctx = 4096
    p.n_parallel = 1
    p.cache_prompt = True
    p.verbosity = -1
    p.cpuparams.n_threads = 2
    p.cpuparams_batch.n_threads = 2
    if speculate:
        p.speculative.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
        p.speculative.draft.n_max = 32
        p.speculative.draft.n_min = 0
        p.speculative.ngram_simple.size_n = match
    return xllamacpp.Server(p)


def score(server, tok, option):
    ids = tok.encode(option)
    request = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": len(ids) + 1,
               "temperature": 0.0, "top_k": 1, "cache_prompt": True, "grammar": token_grammar(ids),
               "logprobs": True, "top_logprobs": 1}
    started = time.perf_counter()
    reply = server.handle_chat_completions(request)
    return time.perf_counter() - started, reply["choices"][0]["message"]["content"], token_logprobs(reply["choices"][0])


def main() -> None:
    path = sys.argv[1]
    match = int(sys.argv[sys.argv.index("--match") + 1]) if "--match" in sys.argv else 12
    tok = load_reply_tokenizer(Path(path))
    results = {}
    for speculate in (False, True):
        server = engine(path, speculate, match)
        score(server, tok, OPTIONS[0])  # warm the prompt's KV cache
        rows = [score(server, tok, o) for o in OPTIONS]
        results[speculate] = rows
        print(f"speculate={speculate}: {sum(r[0] for r in rows):.2f} s for {len(OPTIONS)} options", flush=True)
        del server
    for (t0, text0, lp0), (t1, text1, lp1) in zip(results[False], results[True]):
        diff = max((abs(a - b) for a, b in zip(lp0, lp1)), default=float("nan"))
        print(f"{t0:.2f}s -> {t1:.2f}s  same_text={text0 == text1}  n={len(lp0)}/{len(lp1)}  max|dlogp|={diff:.4f}")


if __name__ == "__main__":
    main()
