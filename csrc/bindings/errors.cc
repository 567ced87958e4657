#include "bindings/errors.h"

#include <mutex>
#include <unordered_map>

#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {
namespace {

// Python classes by error code, installed by tritonserver._errors at import.
// Held as raw strong references for the life of the process: the classes
// must outlive every thread that may raise them.
std::unordered_map<int, PyObject*>& ErrorClasses() {
  static auto* classes = new std::unordered_map<int, PyObject*>();
  return *classes;
}

void SetErrorClasses(const py::dict& mapping) {
  auto& classes = ErrorClasses();
  for (auto item : mapping) {
    int code = item.first.cast<int>();
    PyObject* cls = item.second.ptr();
    if (!PyType_Check(cls) ||
        !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls),
                          reinterpret_cast<PyTypeObject*>(PyExc_Exception))) {
      throw py::type_error("error classes must be Exception subclasses");
    }
    Py_INCREF(cls);
    auto it = classes.find(code);
    if (it != classes.end()) Py_DECREF(it->second);
    classes[code] = cls;
  }
}

}  // namespace

ErrorPtr::~ErrorPtr() {
  if (err_ != nullptr && CoreLoaded()) Core().TRITONSERVER_ErrorDelete(err_);
}

TritonError ToException(TRITONSERVER_Error* err) {
  const CoreApi& api = Core();
  const char* msg = api.TRITONSERVER_ErrorMessage(err);
  return TritonError(api.TRITONSERVER_ErrorCode(err), msg ? msg : "");
}

void Check(TRITONSERVER_Error* err) {
  if (err == nullptr) return;
  ErrorPtr owned(err);
  throw ToException(err);
}

TRITONSERVER_Error* MakeError(TRITONSERVER_Error_Code code,
                              const std::string& message) {
  return Core().TRITONSERVER_ErrorNew(code, message.c_str());
}

void RegisterErrors(py::module_& m) {
  m.def("set_error_classes", &SetErrorClasses, py::arg("mapping"),
        "Install the Python exception class raised for each error code.");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const TritonError& e) {
      auto& classes = ErrorClasses();
      auto it = classes.find(static_cast<int>(e.code()));
      PyObject* cls = it != classes.end() ? it->second : PyExc_RuntimeError;
      PyErr_SetString(cls, e.what());
    }
  });
}

}  // namespace tritonpy
