"""What a release wheel and the sdist may hold, and must hold.

Everything not matched here is a build leftover (or a new kind of file: add
it here on purpose). The wheel holds what users need: the Python package with
its stubs and py.typed, the binding, our backends, the backend SDK's headers
and CMake package, the gRPC frontend's descriptor set (its .proto files
compiled) and the example model repository. The sdist holds what
building needs: the CMake project, the C++ sources, our Triton C API
declarations and the Python package's sources.
"""

from __future__ import annotations

import re
from typing import Iterable, List, Pattern

BACKENDS = ("identity", "add_sub", "repeat", "accumulate", "sleep", "inprocess", "onnxruntime",
            "pytorch", "openvino")


def _patterns(*texts: str) -> List[Pattern[str]]:
    return [re.compile(text) for text in texts]


# Files of python/tritonserver/, as they sit in the package (shipped as-is).
PACKAGE_SOURCES = _patterns(
    r"tritonserver/([A-Za-z0-9_]+/)*[A-Za-z0-9_]+\.pyi?",
    r"tritonserver/py\.typed",
    r"tritonserver/include/([A-Za-z0-9_]+/)*[A-Za-z0-9_]+\.h",
    r"tritonserver/share/cmake/tritonserver/(tritonserverConfig\.cmake|backend\.map)",
    r"tritonserver/example_models/[a-z0-9_]+/(config\.pbtxt|[0-9]+/[^/]+)",
    r"tritonserver/proto/[a-z_]+\.proto",
    # NVIDIA's frontend package's import path (aliases of tritonserver.frontends).
    r"tritonfrontend/([A-Za-z0-9_]+/)*[A-Za-z0-9_]+\.py",
    r"tritonfrontend/py\.typed",
)

# Files the build adds to the package.
BUILT = _patterns(
    r"tritonserver/_c/triton_bindings\.cpython-[^/]+\.so",
    r"tritonserver/backends/(?P<name>[a-z_]+)/libtriton_(?P=name)\.so",
    # The python backend's slot for models run in-process (forwards to inprocess).
    r"tritonserver/backends/inprocess/python_inprocess/libtriton_python_inprocess\.so",
    # The stub's library behind a 2026 python backend's checks.
    r"tritonserver/backends/stub_guard/python_stub_guard/libtriton_python_stub_guard\.so",
    r"tritonserver/include/triton/triton(server|backend)\.h",
    r"tritonserver/share/cmake/tritonserver/tritonserverConfigVersion\.cmake",
    r"tritonserver/proto/descriptors\.pb",
)

DIST_INFO = _patterns(
    r"tritonserver_embedded-[^/]+\.dist-info/(METADATA|WHEEL|RECORD|entry_points\.txt)",
)

WHEEL_REQUIRED = _patterns(
    r"tritonserver/__init__\.py",
    r"tritonserver/py\.typed",
    r"tritonfrontend/__init__\.py",
    r"tritonserver/_c/triton_bindings\.pyi",
    r"tritonserver/_c/triton_bindings\.cpython-[^/]+\.so",
    *(rf"tritonserver/backends/{name}/libtriton_{name}\.so" for name in BACKENDS),
    r"tritonserver/backends/inprocess/python_inprocess/libtriton_python_inprocess\.so",
    r"tritonserver/backends/stub_guard/python_stub_guard/libtriton_python_stub_guard\.so",
    r"tritonserver/include/tritonserver/backend\.h",
    r"tritonserver/include/triton/tritonbackend\.h",
    r"tritonserver/include/triton/tritonserver\.h",
    r"tritonserver/share/cmake/tritonserver/tritonserverConfig\.cmake",
    r"tritonserver/share/cmake/tritonserver/tritonserverConfigVersion\.cmake",
    r"tritonserver/example_models/add_sub_fp32/config\.pbtxt",
    r"tritonserver/proto/descriptors\.pb",
    r"tritonserver_embedded-[^/]+\.dist-info/METADATA",
)

SDIST_TOP = _patterns(r"pyproject\.toml", r"CMakeLists\.txt", r"README\.md", r"PKG-INFO")
SDIST_BUILD_SOURCES = _patterns(
    r"csrc/([A-Za-z0-9_]+/)*([A-Za-z0-9_]+\.(cc|h|def)|CMakeLists\.txt)",
    r"third_party/([A-Za-z0-9_]+/)*[A-Za-z0-9_]+\.h",
)
SDIST_REQUIRED = _patterns(
    *(p.pattern for p in SDIST_TOP),
    r"csrc/core_api\.cc",
    r"csrc/bindings/module\.cc",
    r"csrc/backends/CMakeLists\.txt",
    r"third_party/triton/tritonbackend\.h",
    r"python/tritonserver/__init__\.py",
    r"python/tritonfrontend/__init__\.py",
    r"python/tritonserver/share/cmake/tritonserver/tritonserverConfig\.cmake",
)


def _matches(name: str, patterns: Iterable[Pattern[str]]) -> bool:
    return any(p.fullmatch(name) for p in patterns)


def _missing(names: List[str], required: Iterable[Pattern[str]]) -> List[str]:
    return [p.pattern for p in required if not any(p.fullmatch(n) for n in names)]


def wheel_problems(names: Iterable[str]) -> List[str]:
    """What is wrong with a wheel holding the files ``names`` (empty: nothing)."""
    files = [n for n in names if not n.endswith("/")]
    allowed = PACKAGE_SOURCES + BUILT + DIST_INFO
    problems = [f"unexpected file in the wheel: {n}" for n in files if not _matches(n, allowed)]
    problems += [f"missing from the wheel: {p}" for p in _missing(files, WHEEL_REQUIRED)]
    return problems


def sdist_problems(names: Iterable[str]) -> List[str]:
    """What is wrong with an sdist holding ``names`` (relative to its top folder)."""
    files = [n for n in names if not n.endswith("/")]
    problems = []
    for name in files:
        package_file = (name[len("python/"):]
                        if name.startswith(("python/tritonserver/", "python/tritonfrontend/"))
                        else None)
        if package_file is not None and _matches(package_file, PACKAGE_SOURCES):
            continue
        if not _matches(name, SDIST_TOP + SDIST_BUILD_SOURCES):
            problems.append(f"unexpected file in the sdist: {name}")
    problems += [f"missing from the sdist: {p}" for p in _missing(files, SDIST_REQUIRED)]
    return problems
