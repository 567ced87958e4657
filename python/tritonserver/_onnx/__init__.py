"""The ``onnxruntime`` backend's Python side: ONNX models of ordinary Triton
model repositories, run by ONNX Runtime's Python API inside this process.

The backend library (csrc/backends/onnxruntime) forwards to the inprocess
backend, whose dispatch hands models whose configuration names the
``onnxruntime`` backend to this package: _config completes and checks the
configuration against the model, _session makes ONNX Runtime sessions from
it, and _model runs batches. Installed with ``pip install "tritonserver-embedded[onnx]"``.
"""

BACKEND = "onnxruntime"
