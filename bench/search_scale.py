"""How the library search index scales: build time, disk, memory and query latency at 10k / 100k / 1M lines.

    .venv/bin/python bench/search_scale.py [--sizes 10000 100000 1000000] [--queries 50]

The index (``vidagent.memory.search_index``) is filled with synthetic lines through ``SearchIndex.add_lines``, a
"video" of 1,000 lines at a time: texts of 8 words drawn from a 5,000-word vocabulary (Zipf-distributed, as words
are), one line in 20 an object of one of 80 categories, unit 384-d vectors (E5's width) drawn around 2,000 topic
centres so that near neighbours exist. No model runs. Queries: a line's own vector perturbed, with two of its
words and, for half of them, its category's name. Reported per size: build seconds, file size, peak resident
memory of the process (which holds its own copy of every vector for the recall check: 1.5 GB at 1M), the first
search after the index changed (it reads the sign-bit codes), p50/p95 latency of a hybrid search (vectors + words + category, fused) and of the vector
ranking alone, and the vector ranking's recall@10 against an exact scan of every vector (numpy): 1.0 below the
exact limit (60,000 lines), the sign-bit candidates' recall after re-ranking above it.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from vidagent.memory.search_index import EXACT_LIMIT, RANKED_PER_LIST, SearchFilters, SearchIndex
from vidagent.memory.search_lines import SearchLine

DIM = 384
PER_VIDEO = 1000
VOCABULARY = 5000
TOPICS = 2000
CATEGORIES = [f"thing{i}" for i in range(80)]


def synthetic(rng: np.random.Generator, centres: np.ndarray, count: int, words: list[str]
              ) -> tuple[list[SearchLine], np.ndarray]:
    topics = rng.integers(0, TOPICS, count)
    vectors = centres[topics] + 0.35 * rng.standard_normal((count, DIM)).astype(np.float32) / np.sqrt(DIM)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ranks = np.minimum(rng.zipf(1.3, (count, 8)), VOCABULARY) - 1
    lines = []
    for row in range(count):
        text = " ".join(words[r] for r in ranks[row])
        if row % 20 == 0:
            category = CATEGORIES[topics[row] % len(CATEGORIES)]
            lines.append(SearchLine("object", row % 600, row % 600 + 4.0, f"{category}: {text}", category))
        else:
            lines.append(SearchLine("segment", row % 600, row % 600 + 2.0, text))
    return lines, vectors.astype(np.float32)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(size: int, queries: int, folder: Path) -> dict[str, float]:
    rng = np.random.default_rng(size)
    centres = rng.standard_normal((TOPICS, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    words = [f"w{i}" for i in range(VOCABULARY)]
    path = folder / f"search-{size}.sqlite"
    kept_vectors = np.zeros((size, DIM), np.float32)  # for the exact recall check
    kept_lines: list[SearchLine] = []
    started = time.perf_counter()
    with SearchIndex(path) as index:
        for video in range(size // PER_VIDEO):
            lines, vectors = synthetic(rng, centres, PER_VIDEO, words)
            index.add_lines(f"video{video:07d}", f"/videos/{video}.mp4", "2026-11-01T00:00:00+00:00", 600.0, "synthetic",
                            lines, vectors)
            kept_vectors[video * PER_VIDEO:(video + 1) * PER_VIDEO] = vectors
            if video < 5:
                kept_lines += lines
        build_s = time.perf_counter() - started
        t = time.perf_counter()
        index.search("w1", kept_vectors[0], SearchFilters(), limit=40)  # the first search after a change reads the codes
        first_ms = 1000 * (time.perf_counter() - t)
        hybrid, meaning, recall = [], [], []
        for q in range(queries):
            target = int(rng.integers(0, len(kept_lines)))
            vector = kept_vectors[target] + 0.2 * rng.standard_normal(DIM).astype(np.float32) / np.sqrt(DIM)
            vector /= np.linalg.norm(vector)
            line = kept_lines[target]
            query = " ".join(line.text.replace(":", "").split()[1:3] if line.category else line.text.split()[:2])
            if q % 2 == 0:
                query += f" {CATEGORIES[q % len(CATEGORIES)]}"
            t = time.perf_counter()
            index.search(query, vector, SearchFilters(), limit=40)
            hybrid.append(time.perf_counter() - t)
            t = time.perf_counter()
            found = index._by_meaning(vector, SearchFilters(), RANKED_PER_LIST)[:10]  # as a search asks
            meaning.append(time.perf_counter() - t)
            exact = set(np.argsort(-(kept_vectors @ vector))[:10] + 1)  # line ids start at 1
            recall.append(len(exact & {line_id for line_id, _ in found}) / 10)
    return {"lines": size, "build_s": build_s, "first_ms": first_ms, "disk_mb": path.stat().st_size / 2**20, "peak_mb": peak_mb(),
            "hybrid_p50_ms": 1000 * float(np.percentile(hybrid, 50)), "hybrid_p95_ms": 1000 * float(np.percentile(hybrid, 95)),
            "vector_p50_ms": 1000 * float(np.percentile(meaning, 50)), "vector_p95_ms": 1000 * float(np.percentile(meaning, 95)),
            "recall_at_10": float(np.mean(recall))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    print(f"exact vector search up to {EXACT_LIMIT} lines")
    print("| lines | build s | disk MB | peak MB | first search ms | hybrid p50 / p95 ms | vector p50 / p95 ms | "
          "vector recall@10 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="vidagent-search-scale-") as folder:
        for size in args.sizes:
            r = run(size, args.queries, Path(folder))
            print(f"| {r['lines']:,} | {r['build_s']:.1f} | {r['disk_mb']:.0f} | {r['peak_mb']:.0f} | {r['first_ms']:.0f} | "
                  f"{r['hybrid_p50_ms']:.1f} / {r['hybrid_p95_ms']:.1f} | {r['vector_p50_ms']:.1f} / "
                  f"{r['vector_p95_ms']:.1f} | {r['recall_at_10']:.2f} |", flush=True)
            Path(folder, f"search-{size}.sqlite").unlink()


if __name__ == "__main__":
    main()
