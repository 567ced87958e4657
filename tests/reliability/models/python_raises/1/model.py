# Raises from execute() when INPUT0 holds a negative value; otherwise
# OUTPUT0 = INPUT0. The python backend must turn the exception into an
# error response for that call, and keep serving.
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            if (x < 0).any():
                raise ValueError(f"python_raises: negative input {x.min()}")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x)]))
        return responses
