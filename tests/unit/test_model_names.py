"""Load requests may not name models outside the repositories: the names
Triton refuses since core 2.60 (core#472), refused with its texts."""

from __future__ import annotations

import pytest

from tritonserver import InvalidArgumentError
from tritonserver._control.model_names import check_load_name

EMPTY = "Model name cannot be empty. Please enter a valid name to deploy."


@pytest.mark.parametrize("name", ["", " ", "  ", "\n\t", "\r\v\f "])
def test_empty_or_blank_names_are_refused(name):
    with pytest.raises(InvalidArgumentError) as e:
        check_load_name(name)
    assert str(e.value) == EMPTY


@pytest.mark.parametrize("name", ["..", " .. ", "/etc/passwd", "model/..", "a/b", "model/",
                                  "../../../../etc", "\t../x"])
def test_traversal_names_are_refused_naming_the_name_as_given(name):
    with pytest.raises(InvalidArgumentError) as e:
        check_load_name(name)
    assert str(e.value) == (f"invalid model name '{name}', model name must not contain path "
                            "traversal characters")


@pytest.mark.parametrize("name", ["identity", "model.onnx", "...", ".", "a..b", " padded ",
                                  "name with spaces", "ünïcode", "x\\y"])
def test_other_names_pass_to_the_core(name):
    check_load_name(name)  # the core decides: most are simply not found
