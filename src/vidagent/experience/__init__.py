"""Experience kept across questions, the half that needs no agent types: the store, replay, complexity,
workflows, task types and distilling (the Learner and the keeper are in ``vidagent.agent.learning``, whose
docstring says why the two halves are split)."""
