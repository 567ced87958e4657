"""Python models run by the core inside this process (the ``inprocess``
backend, csrc/backends/inprocess): PythonModel and the request, response
and sender types its execute sees. See docs/inprocess.md."""

from tritonserver._inprocess._model import ModelInstance, PythonModel
from tritonserver._inprocess._request import ModelRequest, ResponseSender
from tritonserver._inprocess._response import ModelResponse

__all__ = ["ModelInstance", "ModelRequest", "ModelResponse", "PythonModel", "ResponseSender"]
