"""Real models: a scikit-learn pipeline exported by skl2onnx (predictions as
scikit-learn's own), a convolutional network (outputs as ONNX Runtime's own,
run directly), and an ensemble joining an ONNX model and a PythonModel."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from frameworks import models_onnx as models  # noqa: E402

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT


def test_a_scikit_learn_pipeline_predicts_as_scikit_learn(tmp_path):
    pytest.importorskip("sklearn")
    skl2onnx = pytest.importorskip("skl2onnx")
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(11)
    features = rng.standard_normal((300, 4)).astype(np.float32)
    labels = (features[:, 0] + 2 * features[:, 1] - features[:, 3] > 0).astype(np.int64)
    labels[features[:, 2] > 1.2] = 2
    pipeline = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(features,
                                                                                   labels)
    exported = skl2onnx.convert_sklearn(
        pipeline, initial_types=[("features", FloatTensorType([None, 4]))],
        options={id(pipeline.steps[-1][1]): {"zipmap": False}}, target_opset=17)
    # Only max_batch_size given: inputs and outputs come from the model.
    models.write(str(tmp_path), "classifier", exported, "max_batch_size: 64")
    s = start_server(model_repository=str(tmp_path), strict_model_config=False)
    try:
        model = s.model("classifier")
        config = model.config()
        assert {o["name"] for o in config["output"]} == {"label", "probabilities"}
        sample = rng.standard_normal((32, 4)).astype(np.float32)
        out = next(model.infer(inputs={"features": sample})).outputs
        # A label per item: [batch] in the model, completed as dims [1] with
        # reshape [] (as Triton's backend does), so [batch, 1] to clients.
        assert list(out["label"].shape) == [32, 1]
        np.testing.assert_array_equal(np.from_dlpack(out["label"]).reshape(-1),
                                      pipeline.predict(sample))
        np.testing.assert_allclose(np.from_dlpack(out["probabilities"]),
                                   pipeline.predict_proba(sample), rtol=1e-4, atol=1e-5)
    finally:
        stop_within(s)


def test_a_convolutional_network_matches_onnxruntime_run_directly(tmp_path):
    import onnxruntime

    network = models.conv_net()
    models.write(str(tmp_path), "convnet", network, """
platform: "onnxruntime_onnx"
max_batch_size: 8
dynamic_batching { max_queue_delay_microseconds: 50000 }
input [ { name: "IMAGE" data_type: TYPE_FP32 dims: [ 3, 32, 32 ] } ]
output [ { name: "LOGITS" data_type: TYPE_FP32 dims: [ 10 ] } ]
""")
    direct = onnxruntime.InferenceSession(network.SerializeToString(),
                                          providers=["CPUExecutionProvider"])
    images = np.random.default_rng(5).random((6, 3, 32, 32), dtype=np.float32)
    want = direct.run(["LOGITS"], {"IMAGE": images})[0]
    s = start_server(model_repository=str(tmp_path))
    try:
        model = s.model("convnet")
        whole = np.from_dlpack(next(model.infer(inputs={"IMAGE": images})).outputs["LOGITS"])
        np.testing.assert_allclose(whole, want, rtol=1e-5, atol=1e-6)

        async def one_by_one():  # batched together by the dynamic batcher
            async def one(i):
                async for r in model.async_infer(inputs={"IMAGE": images[i:i + 1]}):
                    return np.from_dlpack(r.outputs["LOGITS"])[0]
            return await asyncio.gather(*(one(i) for i in range(len(images))))

        np.testing.assert_allclose(np.stack(asyncio.run(one_by_one())), want, rtol=1e-5,
                                   atol=1e-6)
    finally:
        stop_within(s)


class PlusOne(tritonserver.PythonModel):
    def execute(self, requests):
        return [{"OUT": r.inputs["Y"] + 1.0} for r in requests]


def test_an_ensemble_joins_an_onnx_model_and_a_python_model(tmp_path):
    repo = str(tmp_path)
    models.write(repo, "scaler", models.scaled(2.0), """
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
""")
    (tmp_path / "pipeline" / "1").mkdir(parents=True)
    (tmp_path / "pipeline" / "config.pbtxt").write_text("""
platform: "ensemble"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [
  { model_name: "scaler" model_version: -1
    input_map { key: "X" value: "X" } output_map { key: "Y" value: "scaled" } },
  { model_name: "plus_one" model_version: -1
    input_map { key: "Y" value: "scaled" } output_map { key: "OUT" value: "OUT" } }
] }
""")
    s = start_server(model_repository=repo, model_control_mode=EXPLICIT)
    try:
        s.register_model("plus_one", PlusOne, inputs={"Y": (np.float32, [4])},
                         outputs={"OUT": (np.float32, [4])}, max_batch_size=4)
        s.load("scaler")
        s.load("pipeline")
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        out = next(s.model("pipeline").infer(inputs={"X": x})).outputs["OUT"]
        np.testing.assert_array_equal(np.from_dlpack(out), x * 2.0 + 1.0)
    finally:
        stop_within(s)


def test_a_zipmap_classifier_is_refused_with_the_export_option_that_fixes_it(tmp_path):
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(3)
    features = rng.standard_normal((60, 3)).astype(np.float32)
    classifier = LogisticRegression().fit(features, (features[:, 0] > 0).astype(np.int64))
    # skl2onnx's default: probabilities as a sequence of maps (ZipMap).
    models.write(str(tmp_path), "zipmapped", skl2onnx.to_onnx(classifier, features))
    models.write(str(tmp_path), "tensors",
                 skl2onnx.to_onnx(classifier, features, options={"zipmap": False}))
    s = tritonserver.Server(model_repository=str(tmp_path), strict_model_config=False,
                            model_control_mode=EXPLICIT, exit_timeout=10).start()
    try:
        with pytest.raises(tritonserver.TritonError) as e:
            s.load("zipmapped")
        message = str(e.value)
        assert "is of type seq(map(int64,tensor(float)))" in message
        assert 'options={"zipmap": False}' in message and "zipmap=False" in message
        s.load("tensors")
        out = next(s.model("tensors").infer(inputs={"X": features[:4]})).outputs
        np.testing.assert_allclose(np.from_dlpack(out["probabilities"]),
                                   classifier.predict_proba(features[:4]), rtol=1e-4, atol=1e-5)
    finally:
        stop_within(s)
