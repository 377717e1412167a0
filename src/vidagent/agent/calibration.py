"""An answer's confidence as the probability that it is right (issue 51).

What a planner measures (an option's probability, a rating) ranks answers but is not a probability of being
right: the embedded 1.5B model spreads its mass over five options, so a right answer and a wrong one both read
about 0.3. Each way of measuring therefore has its own small logistic map, fitted on development questions
(``bench/calibrate.py`` writes ``calibration.toml`` beside this module, with the questions it was fitted on):

    options, by number   the options' numbers scored in every cyclic order (``permuted``): the chosen option's
                         mean probability (as a logit), and how much more the lines read name it than any other
                         option (``option_grounding``)
    options, by text     each option's text scored as the reply (``continuation``): the chosen option's lead in
                         mean log-probability over the next, its length against the options' mean
                         (``length_ratio``: a mean over tokens favours a short reply whose every word is
                         predictable, "C is cooking.", and the short choices are the wrong ones more often: on 100
                         EgoSchema dev questions the map ranks right above wrong with AUROC 0.705 cross-validated,
                         0.689 without it), and its grounding as above
    open answer          the model's P(yes) that the answer is right (``agent.answer_rating``), as a logit, the
                         share of the answer's own words the lines read name (``answer_grounding``: on the 43 own
                         dev questions it lifts the map's cross-validated AUROC from 0.60 to 0.72), and whether the
                         question asks for a time or a count (a 2-second memory places an event only to its
                         segment, and counts come from detections)

and, for each, whether the memory read was described by a captioner (a vision model, released captions) or only by
the offline models, whose answers are right far less often at the same measure.

A map holds for the chat model it was fitted with (the shipped ones: the embedded Qwen2.5-Coder-1.5B, embedded or
served); another model, or a planner and measure no map was fitted for, keeps its measured confidence
(``Answer.confidence``, said in ``answer.artifacts["confidence"]``); the caps of ``agent.confidence`` bound either.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping, Sequence

import numpy as np

from vidagent.agent.task import open_answer
from vidagent.experience.complexity import keywords

EPSILON = 1e-4  # probabilities are kept this far from 0 and 1 before a logit
CALIBRATION_FILE = "calibration.toml"
GROUNDING_PREFIX = 5  # words compared by their first five letters (throws / throwing, cleans / cleaning)
FEATURES = {"permuted": ("top_logit", "grounding", "uncaptioned"),
            "continuation": ("logprob_lead", "length_ratio", "grounding", "uncaptioned"),
            "open": ("rating_logit", "grounding", "asks_when", "asks_count", "uncaptioned")}
"""The features each kind of measure is mapped from (those ``measure_of`` gives)."""


def logit(p: float) -> float:
    p = min(max(p, EPSILON), 1 - EPSILON)
    return math.log(p / (1 - p))


@dataclass(frozen=True)
class Measure:
    """What an answer's planner measured, as the named features of one kind of measure."""

    kind: str  # "permuted" | "continuation" | "open"
    features: Mapping[str, float]


def _stems(text: str) -> set[str]:
    """The words of ``text`` that carry content (three characters or more, no stopword), by their first
    ``GROUNDING_PREFIX`` letters (throws / throwing, cleans / cleaning)."""
    return {word[:GROUNDING_PREFIX] for word in keywords(text) if len(word) >= 3}


def _share_read(stems: set[str], read: set[str]) -> float:
    """The share of ``stems`` among ``read`` (0 when there are none)."""
    return len(stems & read) / len(stems) if stems else 0.0


def _read_stems(question: str, evidence: Sequence[str]) -> set[str]:
    """The stems of the evidence read that the question does not already hold."""
    return set().union(*(_stems(text) for text in evidence)) - _stems(question) if evidence else set()


def option_grounding(question: str, choices: Sequence[str], evidence: Sequence[str], choice_index: int) -> float:
    """How much more of the chosen option the evidence read names than of any other option: the share of its words
    (those not in the question, compared by their first ``GROUNDING_PREFIX`` letters) found in the evidence, minus
    the highest share of another option. Near 0 or below where the lines read say nothing of the answer (the model
    chose from its prior: a woman playing with a dog "throws a frisbee" when the memory holds a person and a dog)."""
    read = _read_stems(question, evidence)
    shares = [_share_read(_stems(choice), read) for choice in choices]
    others = [share for i, share in enumerate(shares) if i != choice_index]
    return shares[choice_index] - (max(others) if others else 0.0)


def answer_grounding(question: str, answer: str, evidence: Sequence[str]) -> float:
    """The share of an open answer's words (those not in the question, by their first ``GROUNDING_PREFIX`` letters)
    that the evidence read names: 1.0 where every word of "a skateboard" or "clideo.com" is in the lines read, 0 where
    the answer comes from the model's prior ("a frisbee", "not mentioned") or names nothing a line holds (a time
    range, a count of one digit)."""
    return _share_read(_stems(answer) - _stems(question), _read_stems(question, evidence))


def length_ratio(choices: Sequence[str], choice_index: int) -> float:
    """The chosen option's length in words over the options' mean length (1.0: an average one)."""
    words = [len(choice.split()) for choice in choices]
    if not words or choice_index >= len(words) or not sum(words):
        return 1.0
    return words[choice_index] / (sum(words) / len(words))


def measure_of(artifacts: Mapping[str, Any], choice_index: int | None, question: str, choices: Sequence[str],
               evidence: Sequence[str], answer: str = "") -> Measure | None:
    """The measure an answer's artifacts hold (its planner's option probabilities, or its rating), with what the
    memory it read was (``memory_captioned``: described by a captioner, or only by the offline models) and, for
    options, how much the evidence it read (``evidence``: the lines' texts) names the chosen one
    (``option_grounding``), for an open answer (``answer``: its text) how much it names the answer
    (``answer_grounding``); None where they hold none this module knows. Reads the JSON an answer's ``to_dict``
    writes, so a stored run is measured as a live answer is."""
    captioned = artifacts.get("memory_captioned")
    if captioned is None:
        return None
    memory = {"uncaptioned": 0.0 if captioned else 1.0}
    if not choices:
        rating = artifacts.get("rating")
        if rating is None:
            return None
        asks = open_answer(question)
        return Measure("open", {"rating_logit": logit(float(rating)),
                                "grounding": answer_grounding(question, answer, evidence),
                                "asks_when": float(asks == "when"), "asks_count": float(asks == "count"), **memory})
    scored = artifacts.get("option_probabilities")
    if not scored or choice_index is None:
        return None
    orders = [list(map(float, order)) for order in scored] if isinstance(scored[0], list) else [list(map(float, scored))]
    count = len(orders[0])
    if choice_index >= count or any(len(order) != count for order in orders):
        return None
    mean = [sum(order[i] for order in orders) / len(orders) for i in range(count)]
    top = mean[choice_index]
    runner_up = max((p for i, p in enumerate(mean) if i != choice_index), default=0.0)
    memory["grounding"] = option_grounding(question, choices, evidence, choice_index) if len(choices) == count else 0.0
    means = artifacts.get("mean_logprobs")
    if means and len(means) == count:
        rest = [float(m) for i, m in enumerate(means) if i != choice_index]
        lead = float(means[choice_index]) - max(rest) if rest else 0.0
        return Measure("continuation", {"top_logit": logit(top), "logprob_lead": lead,
                                        "length_ratio": length_ratio(choices, choice_index), **memory})
    agreement = sum(1 for order in orders if max(range(count), key=order.__getitem__) == choice_index) / len(orders)
    return Measure("permuted", {"top_logit": logit(top), "lead": top - runner_up, "agreement": agreement, **memory})


@dataclass(frozen=True)
class LogisticMap:
    """P(right) = sigmoid(intercept + sum of weight x feature), fitted on ``fitted_on`` with the chat model whose
    name holds one of ``models`` (a map of one model's measures says nothing of another's; empty: any model)."""

    intercept: float
    weights: Mapping[str, float]
    fitted_on: str = ""
    models: tuple[str, ...] = ()

    def fits(self, model: str) -> bool:
        return not self.models or any(name.lower() in model.lower() for name in self.models)

    def probability(self, features: Mapping[str, float]) -> float:
        z = self.intercept + sum(weight * features[name] for name, weight in self.weights.items())
        return 1.0 / (1.0 + math.exp(-max(min(z, 40.0), -40.0)))


@dataclass(frozen=True)
class Calibration:
    """The maps of each planner's measures: ``maps[planner][kind]``."""

    maps: Mapping[str, Mapping[str, LogisticMap]]

    def probability(self, planner: str, measure: Measure | None, model: str = "") -> float | None:
        """The probability that an answer of ``planner`` with ``measure``, by the chat model named ``model``, is
        right; None where no map fits (another planner, measure or model)."""
        if measure is None:
            return None
        found = self.maps.get(planner, {}).get(measure.kind)
        if found is None or not found.fits(model) or any(name not in measure.features for name in found.weights):
            return None
        return round(found.probability(measure.features), 4)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Calibration:
        maps = {planner: {kind: LogisticMap(float(entry["intercept"]), {k: float(v) for k, v in entry["weights"].items()},
                                            str(entry.get("fitted_on", "")), tuple(entry.get("models", ())))
                          for kind, entry in kinds.items()}
                for planner, kinds in data.items() if isinstance(kinds, Mapping)}
        return cls(maps)

    def to_mapping(self) -> dict[str, Any]:
        return {planner: {kind: {"intercept": m.intercept, "weights": dict(m.weights), "fitted_on": m.fitted_on,
                                 "models": list(m.models)}
                          for kind, m in kinds.items()} for planner, kinds in self.maps.items()}


@lru_cache(maxsize=1)
def default_calibration() -> Calibration:
    """The maps shipped with vidagent (``agent/calibration.toml``)."""
    text = resources.files("vidagent.agent").joinpath(CALIBRATION_FILE).read_text(encoding="utf-8")
    return Calibration.from_mapping(tomllib.loads(text))


def fit_logistic(rows: Sequence[Mapping[str, float]], outcomes: Sequence[bool], names: Sequence[str],
                 l2: float = 1.0, steps: int = 200) -> tuple[float, dict[str, float]]:
    """Intercept and weights of a logistic regression of ``outcomes`` on the features ``names`` of ``rows``
    (Newton's method with a small L2 penalty on the weights, not the intercept, so separable data stays finite)."""
    x = np.array([[1.0] + [float(row[name]) for name in names] for row in rows])
    y = np.array([1.0 if ok else 0.0 for ok in outcomes])
    penalty = np.diag([0.0] + [l2] * len(names))
    beta = np.zeros(x.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ beta, -40, 40)))
        gradient = x.T @ (p - y) + penalty @ beta
        hessian = x.T @ (x * (p * (1 - p))[:, None]) + penalty + 1e-9 * np.eye(x.shape[1])
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return float(beta[0]), {name: float(w) for name, w in zip(names, beta[1:])}
