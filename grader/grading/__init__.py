"""Judging learner work: the plan of cases, the verdicts, results and feedback.

- :mod:`.selfstudy`: ``check()`` in the learner's kernel (public cases);
- :mod:`.harness`: a whole submission through the sandbox (public and hidden cases);
- :mod:`.judge`: the one judge both use; :mod:`.results` what it finds, :mod:`.feedback` every
  word a learner reads about it, :mod:`.records` its JSON form;
- :mod:`.notebooks`: reading notebooks and finding their graded cells;
- :mod:`.stack_pieces`: chapter 08's capstone pieces from the learner's earlier answers (self-study).

Imports :mod:`grader.authoring`, :mod:`grader.chapters` and :mod:`grader.sandbox`; never
the instructor's tools.
"""
