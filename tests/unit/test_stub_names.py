"""The names a 2026 python backend refuses on a stub's command line."""

from __future__ import annotations

import pytest

from tritonserver import InvalidArgumentError
from tritonserver._stub_names import INVALID_CHARS, SHM_REGION_NAME, STUB_NAME, check, valid


@pytest.mark.parametrize("char", list(INVALID_CHARS))
def test_every_shell_character_is_refused(char):
    assert not valid(f"model{char}test")
    with pytest.raises(InvalidArgumentError, match=STUB_NAME):
        check(f"model{char}test")


@pytest.mark.parametrize("name", ["TestModel123", "model-with-hyphens", "model_with_underscores",
                                  "a.b", "x_0_1", "názov"])
def test_ordinary_names_pass(name):
    assert valid(name)
    check(name)


def test_empty_is_refused_as_a_name_and_allowed_as_a_prefix():
    with pytest.raises(InvalidArgumentError):
        check("")
    check("", SHM_REGION_NAME, prefix=True)
    with pytest.raises(InvalidArgumentError, match=SHM_REGION_NAME):
        check("p;", SHM_REGION_NAME, prefix=True)
