"""Everything that touches learner code, and the boundary it must cross.

- :mod:`.outcome`: what a call came to (an artifact, facts, or a failure of a closed kind),
  and its one plain form;
- :mod:`.calls`: the one place a learner's function is called and its outcome made
  plain data (used by the sandbox process *and* by ``check()`` in the learner's kernel);
- :mod:`.plain_data`, :mod:`.graph_codec`: what may cross back, and how graphs do;
- :mod:`.filesystem_view`: the allowlisted file system the process sees (bubblewrap);
- :mod:`.confinement`, :mod:`.driver`: the confined process, its limits and deadlines;
- :mod:`.runner` (``python -m grader.sandbox``): the process itself;
- :mod:`.forkserver`: analysis processes forked from a pre-imported parent.

The bottom layer of the grader: it imports no other ``grader`` package, so the sandbox
process never loads reference solutions, hidden seeds or verdicts.
"""
