"""Load the scale backend built from this folder and run its model.

    python run.py build/backends
"""

import os
import sys

import numpy as np

import tritonserver

HERE = os.path.dirname(os.path.abspath(__file__))


def main(backends: str) -> None:
    with tritonserver.Server(model_repository=os.path.join(HERE, "models"),
                             backend_directory=backends) as server:
        x = np.arange(6, dtype=np.float32).reshape(2, 3)  # a batch of 2
        response = next(server.model("scale_fp32").infer(inputs={"INPUT": x}))
        print(np.from_dlpack(response.outputs["OUTPUT"]))  # x * 2.5


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "build", "backends"))
