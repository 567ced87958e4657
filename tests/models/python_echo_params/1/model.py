# Answers with what the model saw of its request: the request parameters and
# the request id, as one JSON string; lets tests prove they reach the model.
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            seen = {"parameters": json.loads(request.parameters() or "{}"),
                    "request_id": request.request_id()}
            out = np.array([json.dumps(seen).encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("PARAMS", out)]))
        return responses
