"""``python -m tritonserver serve``: parses the flags and hands them to a
runner: the in-process frontends, or Ray Serve with ``--ray``."""

from __future__ import annotations

import faulthandler
import sys
import traceback
from typing import Optional, Sequence

from tritonserver._cli.serve_flags import build_parser, end_process, say
from tritonserver._crash_report import requested as crash_report_requested


def main(argv: Optional[Sequence[str]] = None, end: bool = False) -> int:
    """The serve command; ``end``: it is the process's command line, which
    ends when serving does (``python -m tritonserver serve``). An error that
    escapes serving ends it with status 1, its traceback, and a last line
    that says so (a supervisor's log keeps the reason)."""
    try:
        return _serve(argv, end)
    except Exception as e:
        try:
            traceback.print_exc()
        except (OSError, ValueError):  # nobody reads our output any more
            pass
        say(f"tritonserver serve: exiting with status 1: unexpected {type(e).__name__}: {e}")
        if end:
            end_process(1, None)
        return 1


def _whole_lines() -> None:
    """Standard output and error written a whole line at a time. Models run
    in this process print to them while the core's threads write the log to
    the same file; written unbuffered (PYTHONUNBUFFERED, python -u), a print's
    text and its newline were two writes, and a log line fell between them
    (QA greps the log for lines the models print). Line by line, each line is
    one write, and nothing waits in a buffer."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(line_buffering=True, write_through=False)
            except (OSError, ValueError):
                pass


def _serve(argv: Optional[Sequence[str]], end: bool) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if end:  # the process is serve's own
        _whole_lines()
    if crash_report_requested() and not faulthandler.is_enabled():
        # The Python frames after the native report (tritonserver._crash_report,
        # installed when the core loads).
        try:
            faulthandler.enable()
        except (OSError, ValueError, AttributeError):  # stderr is no file (a test's capture)
            pass
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
