"""How well the library search finds things: by the fused ranking, by full text alone and by vectors alone.

    # benchmark questions as queries against every imported memory of their benchmark
    VIDAGENT_LIBRARY=... .venv/bin/python bench/search_quality.py --benchmarks ../shared/data/benchmarks
    # the labelled moments of the shared clips (bench/data/search_moments.json) against a library of the clips
    VIDAGENT_LIBRARY=... .venv/bin/python bench/search_quality.py --moments ../shared/data/videos

``--benchmarks``: each NExT-QA (val_dev.csv) and EgoSchema (questions_dev.json) development question is a query
over every memory imported from its benchmark's captions (``vidagent import`` of the released caption sets; the
library must hold them); the videos are ranked by their best line and Recall@1/@5 of the question's own video is
reported for the fused ranking, words alone and meaning alone. ``--moments``: each labelled query's first moment:
R@1 (its video shows what was asked), the IoU of its spans with the labelled span, and how many of the labelled
videos the first ten moments list; by the kind of query (an object category, on-screen text, a scene that the
offline memory describes only by its objects).
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from vidagent.config import Settings
from vidagent.eval.pairing import mcnemar_exact
from vidagent.memory.library_search import LibrarySearch
from vidagent.memory.search_index import RANK_WEIGHTS, RANKED_PER_LIST, SearchFilters
from vidagent.memory.search_ranking import fuse_ranks, query_words

MOMENTS = Path(__file__).parent / "data" / "search_moments.json"
RANKINGS = {"fused": ("meaning", "words", "category"), "words": ("words",), "meaning": ("meaning",)}


def video_order(search: LibrarySearch, query: str, filters: SearchFilters, use: Sequence[str],
                owner: dict[int, str]) -> list[str]:
    """The videos in the order of their best line, by the rankings ``use`` names fused."""
    index = search.index
    words = query_words(query)
    vector = search.embedder.embed_queries([query])[0]
    depth = RANKED_PER_LIST * 5
    lists = {"meaning": [line for line, _ in index._by_meaning(vector, filters, depth)] if "meaning" in use else [],
             "words": index._by_words(words, filters, depth) if "words" in use else [],
             "category": index._by_category(words.categories_among(index.categories()), filters, depth)
             if "category" in use else []}
    order: list[str] = []
    for line, _, _ in fuse_ranks(lists, RANK_WEIGHTS):
        video = owner[line]
        if video not in order:
            order.append(video)
    return order


def benchmarks(search: LibrarySearch, folder: Path, names: Sequence[str]) -> None:
    questions: dict[str, list[tuple[str, str]]] = {"nextqa": [], "egoschema": []}
    with open(folder / "nextqa" / "val_dev.csv", newline="") as handle:
        questions["nextqa"] = [(row["question"], f"nextqa:{row['video']}") for row in csv.DictReader(handle)]
    for item in json.loads((folder / "egoschema" / "questions_dev.json").read_text()):
        questions["egoschema"].append((item["question"], f"egoschema:{item['q_uid']}"))
    search.sync(progress=True)
    owner = {line: video for line, video in search.index._conn.execute(
        "SELECT l.line_id, v.video_id FROM lines l JOIN videos v ON v.video_key = l.video_key")}
    print("| benchmark | questions | memories searched | ranking | R@1 | R@5 | paired |")
    print("|---|---:|---:|---|---:|---:|---|")
    for name, asked in questions.items():
        if name not in names:
            continue
        ids = tuple(sorted(v for v in set(owner.values()) if v.startswith(f"{name}:")))
        if not ids:
            print(f"| {name} | - | 0 | (import its captions first) | | |")
            continue
        filters = SearchFilters(videos=ids)
        found: dict[str, np.ndarray] = {}
        for ranking, use in RANKINGS.items():
            ranks = []
            for question, target in asked:
                order = video_order(search, question, filters, use, owner)
                ranks.append(order.index(target) + 1 if target in order else 10**6)
            found[ranking] = np.array(ranks)
            paired = ""
            if ranking != "fused":  # the fusion against this ranking alone, question by question (McNemar, exact)
                a, b = found["fused"], found[ranking]
                p1 = mcnemar_exact(int(np.sum((a <= 1) & (b > 1))), int(np.sum((b <= 1) & (a > 1))))
                p5 = mcnemar_exact(int(np.sum((a <= 5) & (b > 5))), int(np.sum((b <= 5) & (a > 5))))
                paired = f" fused vs this: p = {p1:.2g} (R@1), {p5:.2g} (R@5)"
            print(f"| {name} | {len(asked)} | {len(ids)} | {ranking} | {np.mean(found[ranking] <= 1):.3f} | "
                  f"{np.mean(found[ranking] <= 5):.3f} |{paired} |", flush=True)


def iou(a: tuple[float, float], b: Sequence[float]) -> float:
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 0 else 0.0


def moments(search: LibrarySearch, clips: Path) -> None:
    labelled = json.loads(MOMENTS.read_text())["queries"]
    search.sync(progress=True)
    paths = {video_id: path for video_id, path in search.index._conn.execute("SELECT video_id, path FROM videos")}
    print("| query | kind | first moment | right video | IoU | labelled videos in the first 10 |")
    print("|---|---|---|:---:|---:|---:|")
    by_kind: dict[str, list[tuple[float, float, float]]] = {}
    for item in labelled:
        targets = {str((clips / name).resolve()): span for name, span in item["targets"].items()}
        found = search.search(item["query"], limit=10)
        first = found[0] if found else None
        right = first is not None and str(Path(paths[first.video_id]).resolve()) in targets
        overlap = 0.0
        if right:
            spans = first.spans
            overlap = iou((spans[0][0], spans[-1][1]), targets[str(Path(paths[first.video_id]).resolve())])
        listed = {str(Path(paths[m.video_id]).resolve()) for m in found} & set(targets)
        shown = f"{Path(first.path).name} {first.start_s:.1f}-{first.end_s:.1f}" if first else "-"
        print(f"| {item['query']} | {item['kind']} | {shown} | {'yes' if right else 'no'} | {overlap:.2f} | "
              f"{len(listed)}/{len(targets)} |", flush=True)
        by_kind.setdefault(item["kind"], []).append((float(right), overlap, len(listed) / len(targets)))
    print("\n| kind | queries | R@1 | mean IoU (first moment) | labelled videos found in the first 10 |")
    print("|---|---:|---:|---:|---:|")
    for kind, kept in [*by_kind.items(), ("all", [r for group in by_kind.values() for r in group])]:
        values = np.array(kept)
        print(f"| {kind} | {len(kept)} | {values[:, 0].mean():.2f} | {values[:, 1].mean():.2f} | {values[:, 2].mean():.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", type=Path, help="the shared benchmarks folder (nextqa/, egoschema/)")
    parser.add_argument("--only", nargs="+", default=["nextqa", "egoschema"], choices=["nextqa", "egoschema"],
                        help="with --benchmarks: only these")
    parser.add_argument("--moments", type=Path, help="the shared videos folder the labelled moments name")
    args = parser.parse_args()
    with LibrarySearch.open(Settings.from_env()) as search:
        if args.benchmarks:
            benchmarks(search, args.benchmarks, args.only)
        if args.moments:
            moments(search, args.moments)


if __name__ == "__main__":
    main()
