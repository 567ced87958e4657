// What the backend holds of the Python side, once per process: the
// functions of tritonserver._inprocess._dispatch it calls, and the two
// Python types it defines (RequestHandle, InputBuffer; see handle.h).
#pragma once

#include "python.h"

namespace inprocess {

struct Runtime {
  // tritonserver._inprocess._dispatch functions (strong references).
  PyObject* load_model = nullptr;
  PyObject* finalize_model = nullptr;
  PyObject* initialize_instance = nullptr;
  PyObject* finalize_instance = nullptr;
  PyObject* execute = nullptr;
  PyObject* describe_error = nullptr;  // exception -> (code, message)
  PyObject* error_from_code = nullptr;  // (code, message) -> exception
  // Our types (heap types made with PyType_FromSpec).
  PyObject* handle_type = nullptr;
  PyObject* input_type = nullptr;
};

// The process's runtime; filled by Load() (with the GIL), null fields before.
Runtime& TheRuntime();

// Imports the dispatch module and makes the types; throws tb::Error.
void LoadRuntime();

// Sets a tritonserver error of `code` as the pending Python exception.
void RaiseTritonError(TRITONSERVER_Error_Code code, const std::string& message);

// The pending Python exception as a backend error (clears it).
inline tb::Error TakePythonError() {
  return FetchError(TheRuntime().describe_error);
}

}  // namespace inprocess
