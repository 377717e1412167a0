"""DoraemonGPT's Monte Carlo Tree Search planner (§2.3, appendix A.1).

The root is the question (with the automatic overview of the first segments, when the toolbox
can read them); every other node is one ReAct step, and a leaf holds a final answer or a failure.
Each of ``n`` iterations:

1. **Node selection**: a non-leaf node drawn with probability softmax(R) over the nodes'
   rewards (the first iteration can only take the root). The paper's ablation strategies are
   options: ``dfs`` (the deepest open node of the latest chain), ``root`` and ``uniform``.
2. **Branch expansion**: one new ReAct step from that node; the prompt lists the actions its
   children already took and asks for a different one (that request is not kept in the
   conversation the chain continues with). A step that repeats a child is drawn again.
3. **Chain execution**: ReAct steps until a final answer (a non-failure) or a failure: an
   unusable reply, a failed tool call, or ``max_depth`` steps without an answer. A call the path
   already made is not run: the step asks for the answer instead (``ReActSteps.step``).
4. **Reward back-propagation**: ``R_i += R_leaf * exp(beta * (1 - d(i, leaf)))`` for the leaf
   and each ancestor, with ``R_leaf = +alpha`` for an answer and ``-alpha`` for a failure.

An unusable reply is retried once, by the next chain (or, with ``errors_fail`` off, by the next step);
a second unusable reply in a row ends the search, which answers with what it has (issue 42: one run
spent 11 unusable steps of 9-52 s each).

The answer: a vote over the options the answers name (ties go to the earliest answer), or for an
open question an LLM summary of the distinct answers. With ``choose_by`` scoring (the default ``auto`` with a
model that scores given replies: the local one), each answer's option is the one the model's scores favour
after that chain's final answer (as ``react`` reads its chain's), each option's likelihood is its mean
probability over the chains, and a tie of votes goes to the likelier option with no further call; with an
endpoint the option each answer names is read, as the paper reads it. Every answer is a ``Candidate`` with its
votes and reward; the trace is the search tree; ``artifacts["search"]`` has each node's reward
and each iteration's selection.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

from vidagent.agent.answer import Answer, Candidate, answer_key, group_answers, mean_probability
from vidagent.agent.option_scoring import check_choose_by
from vidagent.agent.parsing import extract_choice, parse_react
from vidagent.agent.planning import Needs, Run, option
from vidagent.agent.parsing import reaches_no_answer
from vidagent.agent.react_steps import CallKey, ReActSteps, StepOutcome, answer_format, offered_tools
from vidagent.agent.steps import EvaluationStep, FinalAnswerStep, Trace, model_cost
from vidagent.agent.task import Task
from vidagent.agent.toolbox import Toolbox
from vidagent.llm.base import ChatModel, Message
from vidagent.prompts import prompt
from vidagent.tools import catalogue

PROMPTS = "vidagent.agent"
STRATEGIES = ("mcts", "dfs", "root", "uniform")
TOOL_SETS = catalogue.tool_sets()  # names the tools option takes for sets: the declared tool sets
TIE_BREAKS = ("reward", "llm")
MAX_ALPHA = 100.0
MAX_BETA = 50.0  # exp(beta) must stay a float; 50 already makes the search depth-first in effect


@dataclass(eq=False)
class Node:
    """A node of the search tree. ``step_id`` is the trace step its children hang from."""

    parent: "Node | None"
    depth: int
    step_id: int
    outcome: StepOutcome | None = None  # None for the root
    children: list["Node"] = field(default_factory=list)
    reward: float = 0.0
    answer: str | None = None
    failure: str | None = None
    choice_index: int | None = None
    option_probabilities: tuple[float, ...] | None = None  # the options' scores after this leaf's answer

    @property
    def is_leaf(self) -> bool:
        return self.answer is not None or self.failure is not None

    def path(self) -> list["Node"]:
        """The nodes from the root down to this one."""
        nodes: list[Node] = []
        node: Node | None = self
        while node is not None:
            nodes.append(node)
            node = node.parent
        return nodes[::-1]


@dataclass
class MCTSPlanner:
    """Options: ``n`` (iterations, so at most n answers), ``alpha`` (base reward), ``beta``
    (reward decay), ``strategy`` (mcts, dfs, root, uniform), ``max_depth`` (steps in one chain),
    ``expansion_temperature`` and ``chain_temperature``, ``expansion_tries`` (redraws when an
    expansion repeats a child), ``errors_fail`` (an error ends a chain as a failure, as in the
    paper), ``tie_break`` (options with equal votes: ``llm``, one more model call in the root's
    conversation that picks among them, or ``reward``, the better-rewarded branch; on the dev set
    with the 1.5B model, llm answered 26.1 % of multiple-choice questions against 13.0 % at n=2),
    ``overview_segments`` (0: the root is the question alone, as in the paper), ``tools`` (names,
    comma-separated; ``doraemongpt`` stands for the paper's sub-task tools, ``videoagent`` for VideoAgent's),
    ``described_vqa`` (keep visual_question_answering when it only reads frame descriptions; ReAct
    drops it), ``seed`` (default: from the task), ``choose_by`` (how an answer's option is read: ``auto``, the
    default, scores the options after each answer with a model that can, reads the named option with an
    endpoint; ``text`` always reads it; ``likelihood``, ``permuted``, ``continuation`` score that way; see
    ``option_scoring``), ``unusable_replies`` (unusable replies in a row, across chains, at which the search
    ends). The paper's setting: ``tools=doraemongpt overview_segments=0`` (and ``choose_by=text``
    with the embedded model)."""

    n: int = option(2, 1, 64)
    alpha: float = option(1.0, 0.0, MAX_ALPHA)
    beta: float = option(0.5, 0.0, MAX_BETA)
    strategy: str = "mcts"
    max_depth: int = option(8, 1, 50)
    expansion_temperature: float = option(0.7, 0.0, 2.0)
    chain_temperature: float = option(0.0, 0.0, 2.0)
    expansion_tries: int = option(2, 1, 10)
    errors_fail: bool = True
    tie_break: str = "llm"
    overview_segments: int = option(15, 0, 200)
    seed: int | None = option(None, 0, 2**63 - 1)
    tools: tuple[str, ...] | None = TOOL_SETS["doraemongpt"] + TOOL_SETS["videoagent"]
    described_vqa: bool = True
    choose_by: str = "auto"
    unusable_replies: int = option(2, 1, 10)
    name: ClassVar[str] = "mcts"

    def __post_init__(self) -> None:
        check_choose_by(self.choose_by)
        if self.n < 1:
            raise ValueError("n must be at least 1")
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, not {self.tie_break!r}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {self.strategy!r}")
        if not (0 < self.alpha <= MAX_ALPHA and 0 <= self.beta <= MAX_BETA):  # also refuses nan
            raise ValueError(f"alpha must be in (0, {MAX_ALPHA:g}] and beta in [0, {MAX_BETA:g}]")
        if self.max_depth < 1:
            raise ValueError("max_depth must be at least 1")
        if self.overview_segments < 0:
            raise ValueError("overview_segments must be 0 or more")
        if self.tools is not None:  # a named tool set stands for its tools, in place
            self.tools = tuple(dict.fromkeys(name for item in self.tools for name in TOOL_SETS.get(item, (item,))))

    @property
    def needs(self) -> Needs:
        return Needs(tools=self.tools, knowledge=True)

    def run(self, task: Task, toolbox: Toolbox, llm: ChatModel, trace: Trace | None = None) -> Answer:
        toolbox = offered_tools(toolbox, "MCTS", self.described_vqa)
        return _Search(self, Run.begin(self.name, task, toolbox, llm, trace)).run()

    # -- the pieces a test can check on their own -------------------------------------------
    def backpropagate(self, leaf: Node) -> float:
        """Add the leaf's reward, decayed by distance, to it and to every ancestor; returns R_leaf."""
        reward = -self.alpha if leaf.failure is not None else self.alpha
        for node in leaf.path():
            distance = leaf.depth - node.depth
            node.reward += reward * math.exp(self.beta * (1 - distance))
        return reward

    def selection_probabilities(self, nodes: Sequence[Node], last_leaf: Node | None) -> list[tuple[Node, float]]:
        """The open (non-leaf) nodes with the probability each is selected under the strategy."""
        open_nodes = [node for node in nodes if not node.is_leaf]
        if not open_nodes:
            return []
        if self.strategy == "root":
            return [(open_nodes[0], 1.0)]
        if self.strategy == "dfs":
            deepest = last_leaf.parent if last_leaf is not None and last_leaf.parent is not None else open_nodes[0]
            return [(deepest, 1.0)]
        if self.strategy == "uniform":
            return [(node, 1.0 / len(open_nodes)) for node in open_nodes]
        top = max(node.reward for node in open_nodes)
        weights = [math.exp(node.reward - top) for node in open_nodes]
        total = sum(weights)
        return [(node, weight / total) for node, weight in zip(open_nodes, weights)]


class _Search:
    """One run of the planner over one question."""

    def __init__(self, planner: MCTSPlanner, work: Run) -> None:
        self.planner = planner
        self.work = work  # the question's task, model, trace and the step the search starts from
        self.task = work.task
        self.llm = work.llm
        self.trace, root_step = work.trace, work.root
        self.steps = ReActSteps(work.llm, work.toolbox, work.trace)
        self.opening = self.steps.opening(self.task)
        self.root = Node(parent=None, depth=0, step_id=root_step.id)
        self.root_step_id = root_step.id
        self.nodes = [self.root]
        self.leaves: list[Node] = []
        self.evidence: list[Any] = []
        self.iterations: list[dict[str, Any]] = []
        self.unusable = 0  # unusable replies in a row, across chains
        self.unusable_limit = planner.unusable_replies  # ... at which the search ends
        self.rng = random.Random(planner.seed if planner.seed is not None else self.task.seed)
        self.seed_base = self.rng.randrange(1 << 30)
        overview = self.steps.overview(root_step.id, planner.overview_segments)
        self.root_calls: set[CallKey] = set()
        if overview is not None:
            self.root_calls.add(overview.call)  # type: ignore[arg-type]
            self.root.step_id = overview.step_id
            self.evidence.extend(overview.evidence)
        for consulted in self.steps.consult_knowledge(self.task.question, self.root.step_id):
            self.root_calls.add(consulted.call)  # type: ignore[arg-type]
            self.root.step_id = consulted.step_id
            self.evidence.extend(consulted.evidence)

    def run(self) -> Answer:
        for iteration in range(self.planner.n):
            choices = self.planner.selection_probabilities(self.nodes, self.leaves[-1] if self.leaves else None)
            if not choices:
                break
            node, probability = self._draw(choices)
            child = self._expand(node, iteration)
            leaf = self._execute(child, iteration)
            self.leaves.append(leaf)
            reward = self.planner.backpropagate(leaf)
            verdict = f"failure ({leaf.failure})" if leaf.failure is not None else "answer"
            self.trace.add(EvaluationStep(parent_id=leaf.step_id, text=f"iteration {iteration + 1}: {verdict}",
                                          score=reward))
            self.iterations.append({"iteration": iteration + 1, "selected": node.step_id,
                                    "probability": round(probability, 4), "leaf": leaf.step_id,
                                    "failed": leaf.failure is not None})
            if self.unusable >= self.unusable_limit:
                self.trace.add(EvaluationStep(parent_id=leaf.step_id, text=f"{self.unusable} unusable replies in a "
                                              "row: the search ends and answers with what it has"))
                break
        return self._answer()

    # -- the four phases ---------------------------------------------------------------------
    def _draw(self, choices: list[tuple[Node, float]]) -> tuple[Node, float]:
        if len(choices) == 1:
            return choices[0]
        index = self.rng.choices(range(len(choices)), weights=[p for _, p in choices])[0]
        return choices[index]

    def _expand(self, node: Node, iteration: int) -> Node:
        messages = self._messages(node)
        temperature = self.planner.chain_temperature
        if node.children:
            temperature = self.planner.expansion_temperature
            actions = "\n".join(f"- {child.outcome.label()}" for child in node.children
                                if child.outcome and (child.outcome.tool or child.outcome.final_answer is not None))
            if actions:  # unusable replies are not actions worth listing
                request = prompt(PROMPTS, "mcts_expand").render(actions=actions)
                last = messages[-1]
                messages = messages[:-1] + [Message(last.role, last.content.rstrip() + request.rstrip())]
        tried = {child.outcome.call for child in node.children if child.outcome and child.outcome.call}
        outcome = None
        for attempt in range(self.planner.expansion_tries + 1):
            seed = self.seed_base + 1000 * iteration + attempt
            outcome = self.steps.step(messages, node.step_id, task=self.task, seen=self._calls(node),
                                      tried=tried,  # type: ignore[arg-type]
                                      temperature=temperature, seed=seed if temperature > 0 else None)
            if not any(_same_action(outcome, child.outcome) for child in node.children if child.outcome):
                break
            self.trace.add(EvaluationStep(parent_id=outcome.step_id, text="repeats an existing branch: drawn again"))
            temperature = max(temperature, self.planner.expansion_temperature)
        assert outcome is not None
        return self._add(node, outcome)

    def _execute(self, node: Node, iteration: int) -> Node:
        while not node.is_leaf:
            if node.depth >= self.planner.max_depth:
                node.failure = f"no answer after {self.planner.max_depth} steps"
                break
            temperature = self.planner.chain_temperature
            seed = self.seed_base + 1000 * iteration + 100 + node.depth if temperature > 0 else None
            outcome = self.steps.step(self._messages(node), node.step_id, task=self.task, seen=self._calls(node),
                                      temperature=temperature, seed=seed)
            node = self._add(node, outcome)
        return node

    def _add(self, parent: Node, outcome: StepOutcome) -> Node:
        child = Node(parent=parent, depth=parent.depth + 1, step_id=outcome.step_id, outcome=outcome)
        self.unusable = self.unusable + 1 if outcome.unusable else 0
        if outcome.final_answer is not None:
            child.answer = outcome.final_answer
        elif outcome.unusable and (self.planner.errors_fail or self.unusable >= self.unusable_limit):
            child.failure = "unusable reply"  # "an incorrect result format"
        elif outcome.is_error and self.planner.errors_fail and outcome.tool:
            child.failure = f"{outcome.tool} failed"  # "a failed tool call"
        # A call a sibling made (refused, not run) goes back to the model; max_depth bounds a loop.
        parent.children.append(child)
        self.nodes.append(child)
        self.evidence.extend(outcome.evidence)
        return child

    # -- the answer --------------------------------------------------------------------------
    def _answer(self) -> Answer:
        answered = [leaf for leaf in self.leaves if leaf.answer is not None]
        if not answered:
            return self._forced()
        if self.task.choices:
            for leaf in answered:
                leaf.choice_index, leaf.option_probabilities = self._read_option(leaf)
            # Answers that name no option stay apart, by their text.
            candidates = self._candidates(answered)
            voted = [c for c in candidates if c.choice_index is not None]
            # Most votes; a tie goes to the likelier option where they were scored, else to the better-rewarded
            # branch, then to the earlier answer (max keeps the first).
            best = max(voted, key=lambda c: (c.votes, c.likelihood or 0.0, c.reward or 0.0)) if voted else candidates[0]
            tied = [c for c in voted if c.votes == best.votes]
            how = "vote"
            if len(tied) > 1 and any(c.likelihood is not None for c in tied):
                how = "vote, tie broken by the scores"
            elif len(tied) > 1 and self.planner.tie_break == "llm":
                best = self._break_tie(tied) or best
                how = "vote, tie broken by the model"
            text = self.task.answer_text(best.text, best.choice_index)
            final = self.trace.add(FinalAnswerStep(
                parent_id=self.root_step_id, answer=text, how=how,
                thought=f"{best.votes} of {len(answered)} answers name this"))
            return self._result(text, best.choice_index, candidates, final.id)
        candidates = self._candidates(answered)
        if len(candidates) == 1:
            final = self.trace.add(FinalAnswerStep(parent_id=self.root_step_id, answer=candidates[0].text, how="vote",
                                                   thought=f"all {len(answered)} answers agree"))
            return self._result(candidates[0].text, None, candidates, final.id)
        text, final_id = self._summarise(candidates)
        return self._result(text, None, candidates, final_id)

    def _read_option(self, leaf: Node) -> tuple[int | None, tuple[float, ...] | None]:
        """The option a leaf's answer stands for, and the options' scores where they were read by scoring
        (``choose_by``); an answer that reaches none ("None") stands for no option and is not scored."""
        messages, answer = self._messages(leaf.parent), leaf.answer or ""
        if not reaches_no_answer(answer, self.task.choices or ()):
            scores = self.steps.scored_after(messages, self.trace[leaf.step_id], self.task,  # type: ignore[arg-type]
                                             self.planner.choose_by)
            if scores is not None:
                return scores.index, scores.probabilities
        return self.steps.choose_option(messages, answer, self.task, leaf.step_id, allow_none=True), None

    def _candidates(self, answered: list[Node]) -> list[Candidate]:
        """One candidate per distinct answer (an option, or a text when it names none): its votes, the
        reward of its best branch (the branch's first node under the root, which back-propagation
        credits with the whole branch) and, where the options were scored, its option's mean probability
        over the scored answers (every scored chain weighs on every option)."""
        scored = [leaf.option_probabilities for leaf in answered if leaf.option_probabilities is not None]
        out = []
        for leaves in group_answers(answered, lambda leaf: answer_key(leaf.answer or "", leaf.choice_index)):
            first = leaves[0]
            reward = max(leaf.path()[1].reward for leaf in leaves)
            out.append(Candidate(self.task.answer_text(first.answer or "", first.choice_index), first.choice_index,
                                 votes=len(leaves), reward=reward, likelihood=mean_probability(scored, first.choice_index),
                                 step_id=first.step_id))
        return out

    def _break_tie(self, tied: list[Candidate]) -> Candidate | None:
        """Ask the model, in the root's conversation (the question and what the overview read),
        which of the equally voted options is best supported; None when it names none of them."""
        started = time.perf_counter()
        answers = "\n".join(f"{c.choice_index}. {c.text}" for c in tied)
        request = prompt(PROMPTS, "mcts_tie").render(answers=answers).strip()
        completion = self.steps.chat(self._messages(self.root) + [Message("user", request)], contract="mcts_tie")
        index = extract_choice(completion.text, self.task.choices or ())
        chosen = next((c for c in tied if c.choice_index == index), None)
        self.trace.add(EvaluationStep(
            parent_id=self.root_step_id, model_output=completion.text,
            text=f"tie between options {', '.join(str(c.choice_index) for c in tied)}: "
                 f"{'the model chose ' + str(chosen.choice_index) if chosen else 'the model named none of them'}",
            **model_cost(completion, started)))
        return chosen

    def _summarise(self, candidates: list[Candidate]) -> tuple[str, int]:
        started = time.perf_counter()
        total = sum(c.votes for c in candidates)
        answers = "\n".join(f"{i}. {c.text} ({c.votes} of {total} attempts)" for i, c in enumerate(candidates, 1))
        summary = prompt(PROMPTS, "mcts_summary")
        request = summary.render(question=self.task.question, answers=answers, answer_format=answer_format(self.task))
        completion = self.llm.chat([Message("user", request.strip())], max_tokens=summary.budget, stop=summary.stop)
        parsed = parse_react(completion.text, [])
        lines = (parsed.final_answer or completion.text).strip().splitlines()
        text = lines[0].strip() if lines and lines[0].strip() else candidates[0].text
        step = self.trace.add(FinalAnswerStep(
            parent_id=self.root_step_id, answer=text, how="summary", model_output=completion.text,
            thought=f"summary of {len(candidates)} different answers",
            **model_cost(completion, started)))
        return text, step.id

    def _forced(self) -> Answer:
        """No chain reached an answer: ask for the best answer at the end of the latest chain."""
        leaf = self.leaves[-1] if self.leaves else self.root
        messages = self._messages(leaf)
        final = self.steps.force_final(messages, leaf.step_id, self.task)
        scores = None if reaches_no_answer(final.answer, self.task.choices or ()) else \
            self.steps.scored_after(messages, final, self.task, self.planner.choose_by)
        choice_index = scores.index if scores is not None else \
            self.steps.choose_option(messages, final.answer, self.task, final.id)
        likelihood = round(scores.probabilities[scores.index], 4) if scores is not None else None
        text = self.task.answer_text(final.answer, choice_index)
        return self._result(text, choice_index, [Candidate(text, choice_index, votes=0, likelihood=likelihood,
                                                           step_id=final.id)], final.id)

    def _result(self, text: str, choice_index: int | None, candidates: list[Candidate], final_id: int) -> Answer:
        first = self.leaves[0] if self.leaves else None
        search = {
            "strategy": self.planner.strategy, "n": self.planner.n, "alpha": self.planner.alpha,
            "beta": self.planner.beta, "final_step": final_id, "iterations": self.iterations,
            "nodes": [{"step_id": node.step_id, "parent": node.parent.step_id if node.parent else None,
                       "depth": node.depth, "reward": round(node.reward, 4), "answer": node.answer,
                       "choice_index": node.choice_index, "failure": node.failure} for node in self.nodes],
            "first_answer": None if first is None or first.answer is None else
            {"text": first.answer, "choice_index": first.choice_index},
        }
        return self.work.answer(text, choice_index, candidates=candidates, evidence=self.evidence,
                                artifacts={"search": search})

    # -- paths -------------------------------------------------------------------------------
    def _messages(self, node: Node | None) -> list[Message]:
        """The conversation that leads to ``node``: the opening, the overview, each step on the path."""
        return self.steps.conversation(self.opening, (node or self.root).step_id)

    def _calls(self, node: Node) -> set[CallKey]:
        calls = set(self.root_calls)
        calls.update(n.outcome.call for n in node.path() if n.outcome is not None and n.outcome.call is not None)
        return calls


def _same_action(outcome: StepOutcome, other: StepOutcome | None) -> bool:
    """Whether a new step repeats a sibling: the same tool call (refused unrun) or the same answer."""
    if other is None:
        return False
    if outcome.final_answer is not None or other.final_answer is not None:
        return outcome.final_answer is not None and other.final_answer is not None and \
            answer_key(outcome.final_answer) == answer_key(other.final_answer)
    return outcome.call is not None and outcome.call == other.call


