"""The one error a site build reports to its user: a chapter's cell or Sphinx failed."""


class SiteBuildError(RuntimeError):
    """The site was not built; the message says which chapter and cell, or that Sphinx failed."""
