"""``tritonfrontend._api``: the module path NVIDIA's package keeps its
frontend classes under (aliases; see tritonfrontend)."""

from tritonfrontend._api._kservegrpc import KServeGrpc
from tritonfrontend._api._kservehttp import KServeHttp
from tritonfrontend._api._metrics import Metrics

__all__ = ["KServeGrpc", "KServeHttp", "Metrics"]
