"""The test oracle: a slow, from-scratch evaluator of difflow query plans and hypothesis
strategies for random plans and update streams.

Nothing here imports ``engine``, ``service`` or ``api``: the oracle is an independent reading
of the plan semantics in ``API.md`` ("Query plans"), used to check the incremental engine.
"""
