#include "bindings/response_objects.h"

#include <initializer_list>
#include <utility>
#include <vector>

#include "bindings/errors.h"
#include "bindings/slot_class.h"

namespace py = pybind11;

namespace tritonpy {
namespace {

// A new instance of `c` with `values` (new references, in field order; a
// null one: its Python error is set) in its slots, as its dataclass's
// __init__ would set them, without running it. Takes every value.
py::object Make(const SlotClass& c, std::initializer_list<PyObject*> values) {
  bool complete = values.size() == c.offsets.size();
  for (PyObject* v : values) complete = complete && v != nullptr;
  PyObject* o = complete ? c.type->tp_alloc(c.type, 0) : nullptr;
  if (o == nullptr) {
    for (PyObject* v : values) Py_XDECREF(v);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "a response object's fields");
    throw py::error_already_set();
  }
  auto offset = c.offsets.begin();
  for (PyObject* v : values) {
    *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + *offset++) = v;  // empty: new
  }
  return py::reinterpret_steal<py::object>(o);
}

// Enum members by value ({int: member} as registered), for the small
// values DataType and MemoryType have.
class Members {
 public:
  explicit Members(const py::dict& by_value) {
    for (auto item : by_value) {
      const long value = PyLong_AsLong(item.first.ptr());
      if (value < 0 || value >= kMax) throw py::value_error("enum values must be in [0, 256)");
      if (static_cast<size_t>(value) >= members_.size()) members_.resize(value + 1);
      members_[value] = py::reinterpret_borrow<py::object>(item.second);
    }
  }
  // A new reference, or null with ValueError set.
  PyObject* Get(int value) const {
    if (value >= 0 && static_cast<size_t>(value) < members_.size() && members_[value]) {
      return members_[value].inc_ref().ptr();
    }
    PyErr_Format(PyExc_ValueError, "unknown enum value %d", value);
    return nullptr;
  }

 private:
  static constexpr long kMax = 256;
  std::vector<py::object> members_;
};

PyObject* NewRef(PyObject* o) {  // Py_NewRef, which Python 3.9 lacks
  Py_INCREF(o);
  return o;
}

PyObject* Str(const std::string& s) {
  return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
}

// Output names as str, each made once: a program reads the same few outputs
// in every response, and a new str per output costs its allocation and, as
// the key of `outputs`, its hash. Used under the GIL.
class Names {
 public:
  // A new reference, or null with the Python error set.
  PyObject* Get(const std::string& name) {
    for (const auto& [text, str] : names_) {
      if (text == name) return NewRef(str.ptr());
    }
    PyObject* str = Str(name);
    if (str != nullptr && names_.size() < kMax) {
      names_.emplace_back(name, py::reinterpret_borrow<py::object>(str));
    }
    return str;
  }

 private:
  static constexpr size_t kMax = 64;  // past it, new names are made each time
  std::vector<std::pair<std::string, py::object>> names_;
};

// What tritonserver._response registered; kept for the process (the
// classes outlive every response).
struct Classes {
  SlotClass response, tensor, buffer;
  Members data_types, memory_types;
  py::object fallback;  // (model, Response record, request_id) -> InferenceResponse
  Names output_names;
};

Classes* classes = nullptr;

PyObject* Shape(const std::vector<int64_t>& dims) {
  PyObject* shape = PyTuple_New(static_cast<Py_ssize_t>(dims.size()));
  if (shape == nullptr) return nullptr;
  for (size_t i = 0; i < dims.size(); ++i) {
    PyObject* dim = PyLong_FromLongLong(dims[i]);
    if (dim == nullptr) {
      Py_DECREF(shape);
      return nullptr;
    }
    PyTuple_SET_ITEM(shape, static_cast<Py_ssize_t>(i), dim);
  }
  return shape;
}

py::object OutputTensor(OutputRecord& o) {
  const Classes& c = *classes;
  py::object memory = py::none();
  if (o.buffer != nullptr) memory = OutputMemory(o);
  // MemoryBuffer(data_ptr, memory_type, memory_type_id, size, owner)
  py::object buffer =
      Make(c.buffer, {PyLong_FromSize_t(o.data_ptr), c.memory_types.Get(o.memory_type),
                      PyLong_FromLongLong(o.memory_type_id), PyLong_FromSize_t(o.byte_size),
                      memory.release().ptr()});
  // Tensor(data_type, shape, memory_buffer)
  return Make(c.tensor, {c.data_types.Get(o.datatype), Shape(o.shape), buffer.release().ptr()});
}

}  // namespace

py::object RecordToResponse(ResponseRecord& record, py::handle model, py::handle request_id) {
  if (classes == nullptr) {
    throw Error(TRITONSERVER_ERROR_INTERNAL,
                "tritonserver._response has not registered its classes");
  }
  Classes& c = *classes;
  if (record.error_code || record.class_labels || record.output_labels) {
    return c.fallback(model, RecordToPython(record), request_id);
  }
  py::dict outputs;
  for (OutputRecord& o : record.outputs) {
    py::object name = py::reinterpret_steal<py::object>(c.output_names.Get(o.name));
    if (!name) throw py::error_already_set();
    if (PyDict_SetItem(outputs.ptr(), name.ptr(), OutputTensor(o).ptr()) != 0) {
      throw py::error_already_set();
    }
  }
  py::object parameters = pyinterop::ParametersToPython(record.parameters);
  // InferenceResponse(model, request_id, parameters, outputs, error,
  // classification_label, final)
  return Make(c.response,
              {NewRef(model.ptr()),
               record.request_id.empty() ? NewRef(request_id.ptr()) : Str(record.request_id),
               parameters.release().ptr(), outputs.release().ptr(), NewRef(Py_None),
               NewRef(Py_None), PyBool_FromLong(record.final())});
}

bool FinalAndError(PyObject* response, bool* final, PyObject** error) {
  if (classes == nullptr || Py_TYPE(response) != classes->response.type) return false;
  // InferenceResponse(model, request_id, parameters, outputs, error,
  // classification_label, final)
  PyObject* is_final = SlotValue(classes->response, response, 6);
  PyObject* held = SlotValue(classes->response, response, 4);
  if (is_final == nullptr || held == nullptr || !PyBool_Check(is_final)) return false;
  *final = is_final == Py_True;
  *error = held;
  return true;
}

void RegisterResponseObjects(py::module_& m) {
  m.def(
      "set_response_classes",
      [](py::object response, py::object tensor, py::object buffer, py::dict data_types,
         py::dict memory_types, py::object fallback) {
        auto* c = new Classes{
            Slotted(std::move(response), {"model", "request_id", "parameters", "outputs", "error",
                                          "classification_label", "final"}),
            Slotted(std::move(tensor), {"data_type", "shape", "memory_buffer"}),
            Slotted(std::move(buffer),
                    {"data_ptr", "memory_type", "memory_type_id", "size", "owner"}),
            Members(data_types),
            Members(memory_types),
            std::move(fallback),
            Names()};
        // Replaced by a later call (a reloaded module); the old set is
        // kept: responses being built may still read it.
        classes = c;
      },
      py::arg("response"), py::arg("tensor"), py::arg("buffer"), py::arg("data_types"),
      py::arg("memory_types"), py::arg("fallback"),
      "Register the classes popped responses are made of (tritonserver._response does, once).");
}

}  // namespace tritonpy
