#include "bindings/response_objects.h"

#include <utility>

#include "bindings/errors.h"

namespace py = pybind11;

namespace tritonpy {
namespace {

// What tritonserver._response registered; kept for the process (the
// classes outlive every response).
struct Classes {
  py::object response, tensor, buffer;  // the three classes
  py::dict data_types, memory_types;    // {int: DataType}, {int: MemoryType}
  py::object fallback;                  // (model, Response record, request_id) -> InferenceResponse
  py::tuple no_args;
  // Attribute names, interned, in each class's field order (instances made
  // alike share their attribute keys, as the dataclasses' own __init__ makes them).
  py::object model, request_id, parameters, outputs, error, classification_label, final;
  py::object data_type, shape, memory_buffer;
  py::object data_ptr, memory_type, memory_type_id, size, owner;
};

Classes* classes = nullptr;

PyObject* NewRef(PyObject* o) {  // Py_NewRef, which Python 3.9 lacks
  Py_INCREF(o);
  return o;
}

py::object Interned(const char* name) {
  return py::reinterpret_steal<py::object>(PyUnicode_InternFromString(name));
}

// An instance of `cls` as object.__new__ makes it (no __init__ run), with
// the attributes Set gives it, in the order its dataclass's __init__ sets
// them: on Python 3.11 and later such instances share one key table and
// keep their values inline, as the dataclass's own instances do, instead
// of one dict object each.
class Instance {
 public:
  explicit Instance(const py::object& cls) {
    PyObject* o = PyBaseObject_Type.tp_new(reinterpret_cast<PyTypeObject*>(cls.ptr()),
                                           classes->no_args.ptr(), nullptr);
    if (o == nullptr) throw py::error_already_set();
    object_ = py::reinterpret_steal<py::object>(o);
  }
  // Takes `value`, a new reference (null: the error set).
  Instance& Set(const py::object& name, PyObject* value) {
    if (value == nullptr) throw py::error_already_set();
    const int failed = PyObject_SetAttr(object_.ptr(), name.ptr(), value);
    Py_DECREF(value);
    if (failed != 0) throw py::error_already_set();
    return *this;
  }
  py::object Make() { return std::move(object_); }

 private:
  py::object object_;
};

PyObject* Member(const py::dict& members, int value) {
  py::int_ key(value);
  PyObject* member = PyDict_GetItemWithError(members.ptr(), key.ptr());
  if (member == nullptr) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "unknown enum value %d", value);
    throw py::error_already_set();
  }
  return NewRef(member);
}

PyObject* Str(const std::string& s) {
  return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
}

py::object OutputTensor(OutputRecord& o) {
  const Classes& c = *classes;
  py::object memory = py::none();
  if (o.buffer != nullptr) memory = OutputMemory(o);
  py::object buffer = Instance(c.buffer)
                          .Set(c.data_ptr, PyLong_FromSize_t(o.data_ptr))
                          .Set(c.memory_type, Member(c.memory_types, o.memory_type))
                          .Set(c.memory_type_id, PyLong_FromLongLong(o.memory_type_id))
                          .Set(c.size, PyLong_FromSize_t(o.byte_size))
                          .Set(c.owner, memory.release().ptr())
                          .Make();
  py::tuple shape(o.shape.size());
  for (size_t i = 0; i < o.shape.size(); ++i) {
    PyObject* dim = PyLong_FromLongLong(o.shape[i]);
    if (dim == nullptr) throw py::error_already_set();
    PyTuple_SET_ITEM(shape.ptr(), static_cast<Py_ssize_t>(i), dim);
  }
  return Instance(c.tensor)
      .Set(c.data_type, Member(c.data_types, o.datatype))
      .Set(c.shape, shape.release().ptr())
      .Set(c.memory_buffer, buffer.release().ptr())
      .Make();
}

}  // namespace

py::object RecordToResponse(ResponseRecord& record, py::handle model, py::handle request_id) {
  if (classes == nullptr) {
    throw Error(TRITONSERVER_ERROR_INTERNAL,
                "tritonserver._response has not registered its classes");
  }
  const Classes& c = *classes;
  if (record.error_code || record.class_labels || record.output_labels) {
    return c.fallback(model, RecordToPython(record), request_id);
  }
  py::dict outputs;
  for (OutputRecord& o : record.outputs) {
    py::object name = py::reinterpret_steal<py::object>(Str(o.name));
    if (!name) throw py::error_already_set();
    if (PyDict_SetItem(outputs.ptr(), name.ptr(), OutputTensor(o).ptr()) != 0) {
      throw py::error_already_set();
    }
  }
  return Instance(c.response)
      .Set(c.model, NewRef(model.ptr()))
      .Set(c.request_id,
           record.request_id.empty() ? NewRef(request_id.ptr()) : Str(record.request_id))
      .Set(c.parameters, pyinterop::ParametersToPython(record.parameters).release().ptr())
      .Set(c.outputs, outputs.release().ptr())
      .Set(c.error, NewRef(Py_None))
      .Set(c.classification_label, NewRef(Py_None))
      .Set(c.final, PyBool_FromLong(record.final()))
      .Make();
}

void RegisterResponseObjects(py::module_& m) {
  m.def(
      "set_response_classes",
      [](py::object response, py::object tensor, py::object buffer, py::dict data_types,
         py::dict memory_types, py::object fallback) {
        for (const py::object* cls : {&response, &tensor, &buffer}) {
          if (!PyType_Check(cls->ptr())) throw py::type_error("expected a class");
        }
        auto* c = new Classes{std::move(response),   std::move(tensor),       std::move(buffer),
                              std::move(data_types), std::move(memory_types), std::move(fallback),
                              py::tuple(0)};
        c->model = Interned("model");
        c->request_id = Interned("request_id");
        c->parameters = Interned("parameters");
        c->outputs = Interned("outputs");
        c->error = Interned("error");
        c->classification_label = Interned("classification_label");
        c->final = Interned("final");
        c->data_type = Interned("data_type");
        c->shape = Interned("shape");
        c->memory_buffer = Interned("memory_buffer");
        c->data_ptr = Interned("data_ptr");
        c->memory_type = Interned("memory_type");
        c->memory_type_id = Interned("memory_type_id");
        c->size = Interned("size");
        c->owner = Interned("owner");
        // Replaced by a later call (a reloaded module); the old set is
        // kept: responses being built may still read it.
        classes = c;
      },
      py::arg("response"), py::arg("tensor"), py::arg("buffer"), py::arg("data_types"),
      py::arg("memory_types"), py::arg("fallback"),
      "Register the classes popped responses are made of (tritonserver._response does, once).");
}

}  // namespace tritonpy
