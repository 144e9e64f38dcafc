"""Building replaces the output folder, so only an empty folder or an earlier site is accepted."""
import pytest

from course_site.build import SITE_MARKER, check_replaceable
from course_site.errors import SiteBuildError


def test_a_folder_with_other_files_is_refused_and_kept(tmp_path):
    (tmp_path / "thesis.tex").write_text("months of work")
    with pytest.raises(SiteBuildError, match="is not a site built by ./course site"):
        check_replaceable(tmp_path)
    assert (tmp_path / "thesis.tex").read_text() == "months of work"


def test_a_new_an_empty_or_an_earlier_site_folder_is_accepted(tmp_path):
    check_replaceable(tmp_path / "new")
    check_replaceable(tmp_path)
    (tmp_path / "index.html").write_text("")
    (tmp_path / SITE_MARKER).write_text("")
    check_replaceable(tmp_path)
