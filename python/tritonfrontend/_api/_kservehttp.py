"""``tritonfrontend._api._kservehttp``: alias (see tritonfrontend)."""

from tritonserver.frontends import KServeHttp

__all__ = ["KServeHttp"]
