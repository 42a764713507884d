"""The home layout: case-study names stay one directory under case-studies/."""

from __future__ import annotations

import pytest

from pipeline.errors import PipelineError
from pipeline.home import Home, case_study_name


@pytest.mark.parametrize(
    "name, ok",
    [
        ("routing-by-rating", True),
        ("january.2026", True),
        ("..", False),
        (".", False),
        ("", False),
        ("../../evil", False),
        ("a/b", False),
        ("/tmp/evil", False),
        ("a\\b", False),
    ],
)
def test_a_case_study_name_is_one_directory(tmp_path, name, ok):
    home = Home.resolve(tmp_path)
    if ok:
        assert case_study_name(name) == name
        assert home.case_study(name) == tmp_path / "case-studies" / name
    else:
        with pytest.raises(PipelineError, match="a name is one directory under case-studies/") as info:
            home.case_study(name)
        assert info.value.exit_code == 2
