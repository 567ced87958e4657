"""NVIDIA's module paths (tritonserver._api._*) name this package's own
classes, so programs written against NVIDIA's package (its OpenAI frontend
annotates with tritonserver._api._response.InferenceResponse) import."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import tritonserver

# NVIDIA's module -> the names it defines that this package has, as NVIDIA's
# python/tritonserver/_api modules define them.
PATHS = {
    "_server": ["Server", "Options", "ModelControlMode", "LogFormat", "InstanceGroupKind",
                "MetricFormat", "RateLimitMode", "RateLimiterResource", "ModelLoadDeviceLimit",
                "LogLevel"],
    "_model": ["Model", "ModelBatchFlag", "ModelTxnPropertyFlag"],
    "_request": ["InferenceRequest", "DataType", "MemoryType"],
    "_response": ["InferenceResponse", "ResponseIterator", "AsyncResponseIterator", "MemoryType"],
    "_tensor": ["Tensor", "DataType", "MemoryType"],
    "_memorybuffer": ["MemoryBuffer", "MemoryType"],
    "_dlpack": ["DLDeviceType"],
    "_logging": ["LogLevel"],
}


@pytest.mark.parametrize("module", sorted(PATHS))
def test_nvidia_module_path_names_our_classes(module):
    loaded = importlib.import_module(f"tritonserver._api.{module}")
    for name in PATHS[module]:
        ours = getattr(tritonserver, name, None)
        if ours is None:  # not exported at top level (LogLevel, ModelDictionary)
            continue
        assert getattr(loaded, name) is ours, (module, name)
    assert sorted(loaded.__all__) == sorted(set(loaded.__all__))


def test_the_annotation_nvidias_openai_frontend_uses():
    """tritonserver._api._response.InferenceResponse, reached as an attribute
    chain after a bare ``import tritonserver`` (as the annotation in NVIDIA's
    openai_frontend/engine/utils/triton.py evaluates it at import), in a fresh
    interpreter so no other test's import hides a missing one."""
    program = ("import tritonserver\n"
               "for m in %r:\n"
               "    getattr(tritonserver._api, m)\n"
               "assert tritonserver._api._response.InferenceResponse"
               " is tritonserver.InferenceResponse\n" % sorted(PATHS))
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
