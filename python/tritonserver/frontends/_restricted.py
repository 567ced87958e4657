"""Restricted API groups: endpoints that answer only requests carrying a
given header (HTTP) or metadata key (gRPC) with a given value, as Triton's
``--http-restricted-api`` and ``--grpc-restricted-protocol`` do.

A group names one or more features (``"model-repository"``, ``"logging"``...),
a key and a value. Each feature may belong to one group only. Over HTTP the
key is a header name (case-insensitive); over gRPC it is a metadata key, and,
as in Triton, the client sends it prefixed with ``triton-grpc-protocol-``.
A request without the right value gets 403 (HTTP) or UNAVAILABLE (gRPC) and
a message naming the key it lacks.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence, Union

from tritonserver._errors import InvalidArgumentError

GRPC_KEY_PREFIX = "triton-grpc-protocol-"


class Protocols(enum.Enum):
    """The API groups that can be restricted (Triton's category names)."""

    HEALTH = "health"
    METADATA = "metadata"
    INFERENCE = "inference"
    SHM_MEMORY = "shared-memory"
    MODEL_CONFIG = "model-config"
    MODEL_REPOSITORY = "model-repository"
    STATISTICS = "statistics"
    TRACE = "trace"
    LOGGING = "logging"


@dataclass
class FeatureGroup:
    """Features that need header (or gRPC metadata) ``key`` set to ``value``."""

    key: str
    value: str
    protocols: list[Protocols] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key or any(c in self.key for c in ":= \t"):
            raise InvalidArgumentError(
                f"FeatureGroup.key: expected a non-empty header name, got {self.key!r}")
        if not isinstance(self.value, str):
            raise InvalidArgumentError(f"FeatureGroup.value: expected a str, got {self.value!r}")
        protocols = []
        for p in self.protocols:
            try:
                protocols.append(p if isinstance(p, Protocols) else Protocols(p))
            except ValueError:
                raise InvalidArgumentError(
                    f"FeatureGroup.protocols: unknown API {p!r}; choose among "
                    f"{', '.join(x.value for x in Protocols)}") from None
        if not protocols:
            raise InvalidArgumentError("FeatureGroup.protocols: name at least one API")
        self.protocols = protocols


class RestrictedFeatures:
    """A set of FeatureGroups, no feature in two groups.

    ``RestrictedFeatures.parse("model-repository,logging:admin-key=secret")``
    reads the command-line form (``<apis>:<key>=<value>``).
    """

    def __init__(self, groups: Iterable[FeatureGroup] = ()):
        self.groups: list[FeatureGroup] = []
        self._by_protocol: dict[Protocols, FeatureGroup] = {}
        for group in groups:
            self.add_feature_group(group)

    def add_feature_group(self, group: FeatureGroup) -> None:
        if not isinstance(group, FeatureGroup):
            raise InvalidArgumentError(
                f"restricted features: expected a FeatureGroup, got {type(group).__name__}")
        for protocol in group.protocols:
            if protocol in self._by_protocol:
                raise InvalidArgumentError(
                    f"restricted API '{protocol.value}' is already in another group")
        for protocol in group.protocols:
            self._by_protocol[protocol] = group
        self.groups.append(group)

    def create_feature_group(self, key: str, value: str,
                             protocols: Sequence[Union[Protocols, str]]) -> None:
        self.add_feature_group(FeatureGroup(key, value, list(protocols)))  # type: ignore[arg-type]

    @staticmethod
    def parse(text: str) -> FeatureGroup:
        """One group from ``<api>[,<api>...]:<key>=<value>``."""
        apis, sep, rest = text.partition(":")
        key, eq, value = rest.partition("=")
        if not sep or not eq or not apis.strip() or not key.strip():
            raise InvalidArgumentError(
                f"restricted API setting {text!r}: expected <api>[,<api>...]:<key>=<value>")
        return FeatureGroup(key.strip(), value,
                            [a.strip() for a in apis.split(",")])  # type: ignore[misc]

    def get(self, protocol: Protocols) -> Optional[FeatureGroup]:
        return self._by_protocol.get(protocol)

    def __bool__(self) -> bool:
        return bool(self.groups)

    def __repr__(self) -> str:
        parts = [f"{','.join(p.value for p in g.protocols)}:{g.key}=<hidden>" for g in self.groups]
        return f"RestrictedFeatures([{'; '.join(parts)}])"


RestrictedLike = Union[None, RestrictedFeatures, Sequence[Union[FeatureGroup, str]], str]


def as_restricted(value: RestrictedLike, name: str) -> RestrictedFeatures:
    """Accepts None, a RestrictedFeatures, FeatureGroups, or command-line strings."""
    if value is None:
        return RestrictedFeatures()
    if isinstance(value, RestrictedFeatures):
        return value
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise InvalidArgumentError(
            f"{name}: expected RestrictedFeatures, FeatureGroups or '<apis>:<key>=<value>' "
            f"strings, got {value!r}")
    groups = [RestrictedFeatures.parse(v) if isinstance(v, str) else v for v in value]
    return RestrictedFeatures(groups)


def restriction_table(features: RestrictedFeatures,
                      key_prefix: str = "") -> dict[Protocols, tuple[str, str]]:
    """{protocol: (lower-case key as received, expected value)}."""
    return {p: ((key_prefix + g.key).lower(), g.value) for g in features.groups
            for p in g.protocols}
