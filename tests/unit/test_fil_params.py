"""The FIL plugin's parts that need no core (plugins/fil): its parameters
read by FIL's rules (RAPIDS-Triton's get_config_param) with FIL's texts, and
its refusal of a Treelite older than 4.7."""

from __future__ import annotations

import pytest

from tritonserver import InternalError, InvalidArgumentError, UnavailableError, UnsupportedError

params = pytest.importorskip("tritonserver_fil._params")
forest = pytest.importorskip("tritonserver_fil._forest")


def read(**given: str):
    return params.read(given)


def test_defaults_and_the_classifier_names():
    p = read(output_class="false")
    assert (p.model_type, p.is_classifier, p.threshold, p.predict_proba, p.cpu_nthread,
            p.engine, p.xgboost_allow_unknown_field) == ("xgboost", False, 0.5, False, -1,
                                                         "gtil", False)
    assert read(is_classifier="true", threshold="0.25").threshold == 0.25
    # output_class (FIL before 25.09) wins when it says true or false
    assert read(output_class="false", is_classifier="true").is_classifier is False


@pytest.mark.parametrize("text, value", [("0.3", 0.3), ("0.3x", 0.3), ("  .5", 0.5),
                                         ("1e-1", 0.1), ("-2", -2.0), ("7.", 7.0)])
def test_numbers_are_read_as_cpp_streams_read_them(text, value):
    assert read(output_class="true", threshold=text).threshold == pytest.approx(value)


def test_a_bad_optional_number_gives_its_default():
    assert read(output_class="false", cpu_nthread="many").cpu_nthread == -1
    assert read(output_class="false", cpu_nthread="4 threads").cpu_nthread == 4
    read(output_class="false", chunk_size="x", transfer_threshold="y", blocks_per_sm="z")


@pytest.mark.parametrize("given, error, text", [
    ({}, InvalidArgumentError, "Required parameter output_class not found in config"),
    ({"output_class": "true"}, InvalidArgumentError,
     "Required parameter threshold not found in config"),
    ({"output_class": "true", "threshold": "x0.5"}, InvalidArgumentError,
     "Bad input for parameter threshold"),
    ({"output_class": "TRUE"}, InternalError,
     "Expected 'true' or 'false' for parameter 'output_class', got: 'TRUE'"),
    ({"output_class": "false", "xgboost_allow_unknown_field": "yes"}, InternalError,
     "Expected 'true' or 'false' for parameter 'xgboost_allow_unknown_field', got: 'yes'"),
    ({"output_class": "false", "model_type": "onnx"}, UnsupportedError,
     "onnx not recognized as a valid serialization format."),
])
def test_refusals_in_fils_words(given, error, text):
    with pytest.raises(error) as caught:
        params.read(given)
    assert str(caught.value) == text


def test_default_file_names_are_fils():
    assert {k: v[0] for k, v in params.FORMATS.items()} == {
        "xgboost": "xgboost.model", "xgboost_json": "xgboost.json", "xgboost_ubj": "xgboost.ubj",
        "lightgbm": "model.txt", "treelite_checkpoint": "checkpoint.tl"}


def test_an_older_treelite_is_refused(monkeypatch):
    import treelite

    monkeypatch.setattr(treelite, "__version__", "4.6.1")
    with pytest.raises(UnavailableError) as caught:
        forest.treelite()
    assert str(caught.value) == ('the fil backend needs treelite>=4.7.2,<5; treelite 4.6.1 is '
                                 'installed: pip install "treelite>=4.7.2,<5"')
