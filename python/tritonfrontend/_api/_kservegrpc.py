"""``tritonfrontend._api._kservegrpc``: aliases (see tritonfrontend)."""

from tritonserver.frontends import KServeGrpc

Grpc_compression_level = KServeGrpc.Grpc_compression_level

__all__ = ["Grpc_compression_level", "KServeGrpc"]
