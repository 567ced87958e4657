# Sleeps for the requested seconds, one request at a time, watching for
# cancellation: lets tests cancel a running request or time out one queued
# behind a busy instance.
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            seconds = pb_utils.get_input_tensor_by_name(request, "SECONDS").as_numpy()
            deadline = time.monotonic() + float(seconds.reshape(-1)[0])
            cancelled = False
            while time.monotonic() < deadline:
                if request.is_cancelled():
                    cancelled = True
                    break
                time.sleep(0.01)
            if cancelled:
                error = pb_utils.TritonError("cancelled while sleeping", pb_utils.TritonError.CANCELLED)
                responses.append(pb_utils.InferenceResponse(error=error))
            else:
                responses.append(pb_utils.InferenceResponse(
                    [pb_utils.Tensor("SLEPT", seconds.astype(np.float32))]))
        return responses
