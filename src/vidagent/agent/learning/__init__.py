"""Experience: what vidagent learns across questions, and the one package where it is learnt.

"Memory" is the video memory (``vidagent.memory``); what is kept from one question for the next is
experience. It lives in two packages, split by the layering, not by topic:

- ``vidagent.experience`` (between tools and agent; it knows no planner, task or trace) holds what needs
  no agent types: the store (``ExperienceStore``, one ``experience`` table beside the video memory in the
  library database, for DigimonGPT's semantic entries, workflows and decision patterns, and for PEIL's
  example bank: AssistGPT's kept traces, kind ``trace``), the replay chosen before a question, the
  complexity that sizes it, workflows, task types and the model calls that distil an episode.
- ``vidagent.agent.learning`` (this package) holds what judges and learns from an agent's answer, and so
  needs ``Task``, ``Answer`` and the ``Trace``: the ``Learner`` (AssistGPT's check of an attempt, which
  PEIL also runs between its attempts) and the keeper (``Experience``: recall before a question, validate
  and keep after it, around any planner).

The agent layer may import ``vidagent.experience``; ``vidagent.experience`` may not import the agent
(``tests/test_layers.py``), so the store stays usable by the CLI (``vidagent experience``), the eval
runner and the server without a planner. The command itself is a face, ``vidagent/experience_cli.py``,
beside the other ``*_cli`` modules.
"""
