"""The executed edition: every chapter with its outputs as a static site (``./course site``).

The stored (blank) notebooks are run, the outputs of their exercise cells removed, and Sphinx
with myst-nb renders the result with execution off, so no solution code ever reaches a page."""
