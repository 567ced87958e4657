#!/usr/bin/env bash
# valgrind memcheck over a small scenario (valgrind_scenario.py), reporting
# definite leaks and invalid accesses whose stack passes through our code:
# the binding (triton_bindings*.so) and our backends (libtriton_<ours>.so).
# The core, CPython and numpy are not ours: their records are counted, not
# judged. Usage: tests/reliability/valgrind.sh   (a few minutes)
# PYTHONMALLOC=malloc lets memcheck see Python's allocations one by one.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${VALGRIND_OUT:-/tmp/tritonserver-valgrind}"
mkdir -p "$out"
rm -f "$out"/memcheck.*.log
# The interpreter itself, not a wrapper script (pyenv shims are bash).
python="$("${PYTHON:-python}" -c 'import sys; print(sys.executable)')"
PYTHONMALLOC=malloc valgrind --tool=memcheck --leak-check=full \
  --show-leak-kinds=definite --errors-for-leak-kinds=definite \
  --num-callers=40 --log-file="$out/memcheck.%p.log" \
  "$python" "$here/valgrind_scenario.py"
"$python" "$here/valgrind_report.py" "$out"/memcheck.*.log
