"""``tritonserver._api._server``: aliases (see tritonserver._api)."""

from tritonserver._enums import (InstanceGroupKind, LogFormat, LogLevel, MetricFormat,
                                 ModelControlMode, RateLimitMode)
from tritonserver._model import ModelDictionary
from tritonserver._options import ModelLoadDeviceLimit, Options, RateLimiterResource
from tritonserver._server import Server

__all__ = ["InstanceGroupKind", "LogFormat", "LogLevel", "MetricFormat", "ModelControlMode",
           "ModelDictionary", "ModelLoadDeviceLimit", "Options", "RateLimitMode",
           "RateLimiterResource", "Server"]
