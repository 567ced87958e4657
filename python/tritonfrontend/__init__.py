"""``tritonfrontend``: NVIDIA's frontend package's import path, served by this
package's own frontends.

NVIDIA ships its C++ HTTP, gRPC and metrics frontends for the in-process
server as a separate package, ``tritonfrontend`` (triton-inference-server/
server, src/python/tritonfrontend), and programs written for it say
``from tritonfrontend import KServeHttp, KServeGrpc, Metrics`` (its
OpenAI-compatible frontend does, for ``--enable-kserve-frontends``). Here
those names are this package's ``tritonserver.frontends`` classes, the same
objects: their ``Options`` take every field NVIDIA's take, with the same
names and defaults, except that they listen on loopback unless told an
address (NVIDIA's listen on 0.0.0.0). They need the ``serve`` extra.
"""

from tritonfrontend._api import KServeGrpc, KServeHttp, Metrics

__all__ = ["KServeGrpc", "KServeHttp", "Metrics"]
