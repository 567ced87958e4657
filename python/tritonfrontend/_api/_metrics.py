"""``tritonfrontend._api._metrics``: alias (see tritonfrontend)."""

from tritonserver.frontends import Metrics

__all__ = ["Metrics"]
