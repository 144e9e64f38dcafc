"""A Gradescope autograder bundle for one chapter.

- :mod:`.bundle`: ``python -m grader gradescope-bundle`` writes the zip Gradescope takes
  (``setup.sh``, ``run_autograder``, the course's packages, the chapter's exercise list
  and a secret seed);
- :mod:`.run`: what ``run_autograder`` runs for each submission on Gradescope.
"""
