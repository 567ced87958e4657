#!/usr/bin/env bash
# The test suite against the binding (and our backends) built under
# AddressSanitizer. Usage, from anywhere:
#   tests/reliability/asan.sh [pytest arguments]     (default: tests/reliability)
# Builds with the CMake preset "asan" into build/asan, installs into
# $ASAN_PREFIX (default /tmp/asaninst) beside a copy of python/tritonserver
# whose _c holds the ASan extension (the source tree's .so is never touched),
# then runs pytest with the sanitizer runtime preloaded. Reports go to
# $ASAN_PREFIX/reports/asan.<pid>; the script fails if there is any.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
prefix="${ASAN_PREFIX:-/tmp/asaninst}"
python="${PYTHON:-python}"

cd "$root"
cmake --preset asan -Dpybind11_DIR="$("$python" -m pybind11 --cmakedir)" \
      -DPython_EXECUTABLE="$(command -v "$python")" > /dev/null
cmake --build --preset asan
rm -rf "$prefix"
cmake --install build/asan --prefix "$prefix" > /dev/null
mkdir -p "$prefix/pkg" "$prefix/reports"
cp -r python/tritonserver "$prefix/pkg/"
rm -f "$prefix"/pkg/tritonserver/_c/triton_bindings*.so
cp "$prefix"/tritonserver/_c/triton_bindings*.so "$prefix/pkg/tritonserver/_c/"
cp -r "$prefix/tritonserver/include/triton" "$prefix/pkg/tritonserver/include/"  # as installed
# The gRPC descriptor set, built by the package's own build (a build dir
# without grpcio-tools skips it): taken from the package this Python has.
descriptors="$("$python" -c 'from tritonserver._package_files import package_file as f; print(f("proto", "descriptors.pb"))')"
[ ! -f "$prefix/tritonserver/proto/descriptors.pb" ] || descriptors="$prefix/tritonserver/proto/descriptors.pb"
cp "$descriptors" "$prefix/pkg/tritonserver/proto/"

[ "$#" -gt 0 ] || set -- "$root/tests/reliability" -m "not stress"
status=0
# detect_leaks=0: CPython's own allocations at exit would flood the report.
# libstdc++ is preloaded with the runtime: python does not link it, and
# ASan's __cxa_throw interceptor needs it present when it starts (else the
# first C++ exception aborts in a CHECK). Child processes (python-backend
# stubs, compilers) inherit the preload; they run fine with it.
( cd "$prefix" &&
  LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so.6)" \
  ASAN_OPTIONS="detect_leaks=0:log_path=$prefix/reports/asan:abort_on_error=1" \
  PYTHONPATH="$prefix/pkg" TRITONSERVER_UNDER_ASAN=1 \
  TRITONSERVER_PACKAGE_BACKENDS="$prefix/tritonserver/backends" \
  "$python" -m pytest -p no:cacheprovider "$@" ) || status=$?
reports=$(ls "$prefix/reports" | wc -l)
echo "asan: $reports sanitizer report(s) in $prefix/reports"
for f in "$prefix"/reports/*; do [ -e "$f" ] && head -40 "$f"; done
[ "$reports" -eq 0 ] || exit 1
exit "$status"
