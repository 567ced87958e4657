"""Network frontends for an in-process Server: Triton's own wire protocols.

``KServeHttp`` (KServe v2 HTTP/REST, with Triton's binary tensor, generate
and repository extensions), ``OpenAI`` (OpenAI's completions, chat
completions and models API, docs/openai.md), ``KServeGrpc`` (the ``inference.GRPCInferenceService``
gRPC service and the standard health service), ``Metrics`` (Prometheus
text at ``/metrics``) and ``SageMaker`` (Triton's SageMaker service:
``/ping``, ``/invocations``, multi-model ``/models``) each serve a running
``tritonserver.Server``; any number may serve one server at once. Clients
written for Triton, such as ``tritonclient``, work unchanged::

    import tritonserver
    from tritonserver.frontends import KServeGrpc, KServeHttp, Metrics

    with tritonserver.Server(model_repository="models") as server, \\
            KServeHttp(server), KServeGrpc(server), Metrics(server):
        ...  # serving on 127.0.0.1:8000 (HTTP), :8001 (gRPC), :8002 (metrics)

They need the ``serve`` extra: ``pip install "tritonserver-embedded[serve]"``.
``create_http_app(server)`` gives the HTTP frontend as a FastAPI (ASGI) app
to serve or mount elsewhere. ``python -m tritonserver serve`` runs them all
as a drop-in for the ``tritonserver`` executable (docs/serving.md).
"""

from tritonserver.frontends._deps import require as _require

_require()

from tritonserver.frontends.grpc.service import KServeGrpc  # noqa: E402
from tritonserver.frontends.http.app import HttpSettings, KServeHttp, create_http_app  # noqa: E402
from tritonserver.frontends.httpbase.metrics import Metrics, create_metrics_app  # noqa: E402
from tritonserver.frontends.openai.app import (  # noqa: E402
    OpenAI,
    OpenAISettings,
    create_openai_app,
)
from tritonserver.frontends.sagemaker.app import (  # noqa: E402
    SageMaker,
    SageMakerSettings,
    create_sagemaker_app,
)
from tritonserver.frontends._restricted import (  # noqa: E402
    FeatureGroup,
    Protocols,
    RestrictedFeatures,
)

__all__ = [
    "FeatureGroup",
    "HttpSettings",
    "KServeGrpc",
    "KServeHttp",
    "Metrics",
    "OpenAI",
    "OpenAISettings",
    "Protocols",
    "RestrictedFeatures",
    "SageMaker",
    "SageMakerSettings",
    "create_http_app",
    "create_metrics_app",
    "create_openai_app",
    "create_sagemaker_app",
]
