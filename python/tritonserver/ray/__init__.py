"""Scale-out on Ray Serve: replicas of the in-process Server behind one endpoint.

``application(...)`` builds a Ray Serve application whose replicas each hold
one in-process ``tritonserver.Server``, started when the replica starts and
stopped when it stops. Ray's HTTP proxy serves the KServe v2 HTTP protocol
(the package's HTTP frontend, so ``tritonclient`` works unchanged), and a
deployment handle gives a Python API to other deployments::

    from ray import serve
    import tritonserver.ray

    app = tritonserver.ray.application(model_repository="models", num_replicas=2)
    serve.run(app, route_prefix="/")       # http://127.0.0.1:8000/v2/...
    handle = serve.get_app_handle("tritonserver")
    outputs = await handle.infer.remote("add_sub_fp32", {"INPUT0": a, "INPUT1": b})

It needs the ``ray`` extra: ``pip install "tritonserver-embedded[ray]"``. The
``python -m tritonserver serve --ray`` command runs it, and Ray's own
``serve run tritonserver.ray:build model-repository=models num-replicas=2``
takes the same flags (docs/scale-out.md).
"""

import importlib.util as _util

if _util.find_spec("ray") is None or _util.find_spec("ray.serve") is None:
    from tritonserver._distribution import install_command as _install

    raise ImportError(f'tritonserver.ray needs Ray Serve: install the ray extra with '
                      f'{_install("ray")}')

from tritonserver.ray._app import application, split_settings  # noqa: E402
from tritonserver.ray._command import build  # noqa: E402
from tritonserver.ray._replica import TritonReplica, current_server, to_numpy  # noqa: E402

__all__ = ["TritonReplica", "application", "build", "current_server", "split_settings",
           "to_numpy"]
