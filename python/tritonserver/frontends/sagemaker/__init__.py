"""Triton's SageMaker HTTP service (the executable's ``--allow-sagemaker``):
``/ping``, ``/invocations`` and the multi-model endpoints under
``/models``, as AWS SageMaker's hosting calls them, over the KServe
frontend's inference path (docs/serving.md, "SageMaker").

``SageMaker(server)`` serves it on port 8080 (loopback unless told);
``create_sagemaker_app(server)`` gives the ASGI app. ``wire`` holds what
SageMaker's wire adds to KServe's body, ``models`` the multi-model loads.
"""

from tritonserver.frontends.sagemaker.app import (
    SageMaker,
    SageMakerSettings,
    create_sagemaker_app,
)

__all__ = ["SageMaker", "SageMakerSettings", "create_sagemaker_app"]
