"""The gRPC messages, made at run time from the descriptors built from ``proto/``.

No generated code is committed or installed. The build compiles
``proto/*.proto`` with protoc into one serialized FileDescriptorSet,
installed as ``proto/descriptors.pb`` (CMakeLists.txt). At first use (per
process) the descriptors go into a private ``DescriptorPool`` and the message
classes are made from it. A private pool means these ``inference.*`` messages
never collide with the same names registered by ``tritonclient.grpc`` (or any
generated code) in protobuf's default pool, so a client and this server can
share a process.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from tritonserver._package_files import package_file

DESCRIPTORS = ("proto", "descriptors.pb")

_lock = threading.Lock()
_messages: Optional["Messages"] = None


class Messages:
    """Message classes by full name (``inference.ModelInferRequest``...),
    also reachable as attributes by short name (``messages.ModelInferRequest``)."""

    def __init__(self, pool: Any, names: list[str]):
        from google.protobuf import message_factory  # type: ignore[import-untyped, unused-ignore]

        get_class = getattr(message_factory, "GetMessageClass", None)
        factory = None if get_class is not None else message_factory.MessageFactory(pool)
        self.pool = pool
        self.by_name: dict[str, Any] = {}
        for full_name in names:
            descriptor = pool.FindMessageTypeByName(full_name)
            cls = get_class(descriptor) if get_class is not None else \
                factory.GetPrototype(descriptor)  # type: ignore[union-attr]
            self.by_name[full_name] = cls

    def __getattr__(self, short: str) -> Any:
        for package in ("inference.", "grpc.health.v1."):
            cls = self.by_name.get(package + short)
            if cls is not None:
                return cls
        raise AttributeError(short)

    def service(self, full_name: str) -> Any:
        """The ServiceDescriptor of a service (its methods and their types)."""
        return self.pool.FindServiceByName(full_name)


def descriptor_set() -> bytes:
    """The serialized FileDescriptorSet the build installed."""
    path = package_file(*DESCRIPTORS)
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        # No run-time protoc fallback: the package never needs grpcio-tools (whose protobuf
        # pins fight tritonclient's), and a package without its build outputs lacks the
        # binding too, so building is the fix either way.
        raise RuntimeError(
            f"{path} is missing: it is made by building the package (pip install ., or "
            "pip install --no-build-isolation -e . with grpcio-tools installed)") from None


def messages() -> Messages:
    """The message classes (made once per process)."""
    global _messages
    with _lock:
        if _messages is None:
            from google.protobuf import descriptor_pb2, descriptor_pool  # type: ignore[import-untyped, unused-ignore]

            files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set())
            pool = descriptor_pool.DescriptorPool()
            names: list[str] = []
            for file_proto in files.file:
                pool.Add(file_proto)
                package = file_proto.package
                _collect(package, file_proto.message_type, names)
            _messages = Messages(pool, names)
        return _messages


def _collect(prefix: str, message_types: Any, out: list[str]) -> None:
    for message in message_types:
        full = f"{prefix}.{message.name}"
        out.append(full)
        _collect(full, message.nested_type, out)
