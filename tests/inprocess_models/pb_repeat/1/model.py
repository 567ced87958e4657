# Decoupled, python-backend style: one response per input value, sent from
# a thread after execute returned, then the final flag. initialize reads
# the python backend's args.
import json
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        out = pb_utils.get_output_config_by_name(self.model_config, "OUT")
        self.out_dtype = pb_utils.triton_string_to_numpy(out["data_type"])
        self.instance_name = args["model_instance_name"]

    def execute(self, requests):
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().copy()
            sender = request.get_response_sender()
            threading.Thread(target=self._answer, args=(sender, values)).start()
        return None

    def _answer(self, sender, values):
        for value in values:
            out = pb_utils.Tensor("OUT", np.array([value], dtype=self.out_dtype))
            sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        pass
