"""The MLServer runtime of the model identity_fp32 (tsbench/mlserver_server.py
copies this file into the model's folder, which MLServer puts on sys.path):
OUTPUT0 is INPUT0, same shape, datatype and data. Runs in MLServer's venv,
so it imports nothing but mlserver."""

from mlserver import MLModel
from mlserver.types import InferenceRequest, InferenceResponse, ResponseOutput


class IdentityFP32(MLModel):
    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        inp = next(i for i in payload.inputs if i.name == "INPUT0")
        return InferenceResponse(
            model_name=self.name, model_version=self.version, id=payload.id,
            outputs=[ResponseOutput(name="OUTPUT0", shape=inp.shape,
                                    datatype=inp.datatype, data=inp.data)])
