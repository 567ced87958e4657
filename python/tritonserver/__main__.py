"""``python -m tritonserver``: install a core, show versions, run a demo,
serve a model repository over the network (``serve``), run NVIDIA's
``tritonserver`` executable of the installed core, set up (``executable``), or
list the backends installed as entry points (``backends``)."""

from __future__ import annotations

import sys
from typing import Optional, Sequence


def _demo() -> int:
    import numpy as np

    import tritonserver

    repo = tritonserver.example_model_repository()
    try:
        server = tritonserver.Server(model_repository=repo).start(wait_until_ready=True)
    except tritonserver.TritonError as e:  # no core, most often: the message says what to do
        print(f"tritonserver demo: {e}", file=sys.stderr)
        return 1
    with server:
        print(f"Triton {server.metadata()['version']} in-process; models:",
              sorted(name for name, _ in server.models()))
        a = np.arange(1, 5, dtype=np.float32)
        b = np.full(4, 10, dtype=np.float32)
        response = next(server.model("add_sub_fp32").infer(inputs={"INPUT0": a, "INPUT1": b}))
        print("add_sub_fp32:", a, "+/-", b)
        print("  OUTPUT0 (sum) =", np.from_dlpack(response.outputs["OUTPUT0"]))
        print("  OUTPUT1 (diff)=", np.from_dlpack(response.outputs["OUTPUT1"]))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["demo"]:
        return _demo()
    if args[:1] == ["serve"]:
        from tritonserver._cli.serve import main as serve_main

        return serve_main(args[1:], end=True)
    if args[:1] == ["executable"]:
        from tritonserver._cli.executable import main as executable_main

        return executable_main(args[1:])
    if args[:1] == ["backends"]:
        from tritonserver._framework._plugins import main as backends_main

        return backends_main(args[1:])
    from tritonserver._core.cli import main as core_main

    return core_main(args)


if __name__ == "__main__":
    sys.exit(main())
