"""``python -m tritonserver serve``: parses the flags and hands them to a
runner: the in-process frontends, or Ray Serve with ``--ray``."""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from tritonserver._cli.serve_flags import build_parser, say


def main(argv: Optional[Sequence[str]] = None, end: bool = False) -> int:
    """The serve command; ``end``: it is the process's command line, which
    ends when serving does (``python -m tritonserver serve``)."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.ray:
        try:
            from tritonserver.ray._command import run as run_on_ray
        except ImportError as e:  # the ray extra is not installed
            say(f"tritonserver serve --ray: {e}")
            return 1
        return run_on_ray(args)
    try:
        from tritonserver._cli.serve_local import run
    except ImportError as e:  # the serve extra is not installed
        say(f"tritonserver serve: {e}")
        return 1
    return run(args, end_process=end)
