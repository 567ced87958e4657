// ResponseStream and SyncResponseStream: the state of a response iterator
// (tritonserver._iterators) as a plain CPython type, and the synchronous
// iterator's __next__ in C.
//
// ResponseIterator and AsyncResponseIterator are Python classes built on
// these. One is made per inference; in C, making it (`_sent`) and taking a
// response from it (`__next__`, `_deliver`) run no Python frame, which was
// most of what the API's Python layer cost a synchronous request
// (benchmarks/README.md).
#include <pybind11/pybind11.h>
#include <structmember.h>

#include <cstddef>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include "bindings/request.h"
#include "bindings/response_objects.h"
#include "bindings/response_stream.h"
#include "pyinterop/fastcall.h"

namespace py = pybind11;

namespace tritonpy {
namespace {

StreamObject* AsStream(PyObject* o) { return reinterpret_cast<StreamObject*>(o); }

PyObject* final_name = nullptr;  // interned attribute names, kept for the process
PyObject* error_name = nullptr;
PyObject* next_forwarded_name = nullptr;
PyObject* cancel_name = nullptr;

// Sets the fields (borrowed arguments); fields already set are replaced.
int Setup(PyObject* o, PyObject* model, PyObject* request, PyObject* request_id,
          PyObject* raise_on_error, PyObject* forwarder) {
  const int raise = PyObject_IsTrue(raise_on_error);
  if (raise < 0) return -1;
  StreamObject* self = AsStream(o);
  Py_INCREF(model);
  Py_XSETREF(self->model, model);
  Py_INCREF(request);
  Py_XSETREF(self->request, request);
  Py_INCREF(request_id);
  Py_XSETREF(self->request_id, request_id);
  Py_INCREF(forwarder);
  Py_XSETREF(self->forwarder, forwarder);
  self->raise_on_error = static_cast<char>(raise);
  self->complete = 0;
  return 0;
}

// _setup(model, request, request_id, raise_on_error, forwarder, /)
PyObject* SetupMethod(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (!pyinterop::ArgumentCount("_setup", nargs, 5, 5)) return nullptr;
  if (Setup(self, args[0], args[1], args[2], args[3], args[4]) < 0) return nullptr;
  Py_RETURN_NONE;
}

// _sent(cls, model, request, raise_on_error, /): a classmethod.
PyObject* Sent(PyObject* cls, PyObject* const* args, Py_ssize_t nargs) {
  if (!pyinterop::ArgumentCount("_sent", nargs, 3, 3)) return nullptr;
  return NewSentStream(reinterpret_cast<PyTypeObject*>(cls), args[0], args[1], args[2]);
}

PyObject* raise_taken = nullptr;  // tritonserver._errors.raise_taken, found at the first error

// Raises the error `response` holds the one way the package raises a held
// error: tritonserver._errors.raise_taken, which takes it off the response
// first (no reference cycle through the traceback keeps the caller's objects
// alive). Returns what that returned (None: the error was gone meanwhile).
PyObject* RaiseTaken(PyObject* response) {
  if (raise_taken == nullptr) {
    PyObject* module = PyImport_ImportModule("tritonserver._errors");
    if (module == nullptr) return nullptr;
    PyObject* found = PyObject_GetAttrString(module, "raise_taken");
    Py_DECREF(module);
    if (found == nullptr) return nullptr;
    if (raise_taken == nullptr) {
      raise_taken = found;  // kept for the process
    } else {
      Py_DECREF(found);  // another thread found it while the import let go of the GIL
    }
  }
  return PyObject_CallFunctionObjArgs(raise_taken, response, error_name, nullptr);
}

}  // namespace

PyObject* DeliverResponse(StreamObject* self, PyObject* response) {
  if (response == nullptr) return nullptr;
  bool is_final = false;
  PyObject* error = nullptr;                         // a new reference once read
  if (FinalAndError(response, &is_final, &error)) {  // the binding's own response: its slots
    Py_INCREF(error);
  } else {
    PyObject* final = PyObject_GetAttr(response, final_name);
    const int truth = final == nullptr ? -1 : PyObject_IsTrue(final);
    Py_XDECREF(final);
    if (truth < 0) {
      Py_DECREF(response);
      return nullptr;
    }
    is_final = truth != 0;
  }
  if (is_final) self->complete = 1;
  if (!self->raise_on_error) {
    Py_XDECREF(error);
    return response;
  }
  if (error == nullptr) error = PyObject_GetAttr(response, error_name);
  if (error == nullptr) {
    Py_DECREF(response);
    return nullptr;
  }
  const bool none = error == Py_None;  // the hot path
  Py_DECREF(error);
  if (none) return response;
  PyObject* returned = RaiseTaken(response);
  if (returned == nullptr) {
    Py_DECREF(response);
    return nullptr;
  }
  Py_DECREF(returned);
  return response;
}

PyObject* NewSentStream(PyTypeObject* type, PyObject* model, PyObject* request,
                        PyObject* raise_on_error) {
  PyObject* o = type->tp_alloc(type, 0);
  if (o == nullptr) return nullptr;
  if (Setup(o, model, request, Py_None, raise_on_error, Py_None) < 0) {
    Py_DECREF(o);
    return nullptr;
  }
  return o;
}

bool StreamIsSetUp(StreamObject* self) {
  if (self->request != nullptr && self->model != nullptr && self->request_id != nullptr &&
      self->forwarder != nullptr) {
    return true;
  }
  PyErr_SetString(PyExc_RuntimeError, "the response iterator was not set up");
  return false;
}

namespace {

// _deliver(response, /)
PyObject* DeliverMethod(PyObject* self, PyObject* response) {
  Py_INCREF(response);
  return DeliverResponse(AsStream(self), response);
}

// cancel()
PyObject* Cancel(PyObject* o, PyObject*) {
  StreamObject* self = AsStream(o);
  if (self->complete || self->request == nullptr) Py_RETURN_NONE;
  return PyObject_CallMethodObjArgs(self->request, cancel_name, nullptr);
}

// SyncResponseStream.__next__: the next response, waited for without the
// GIL; the end after the final one.
PyObject* Next(PyObject* o) {
  StreamObject* self = AsStream(o);
  if (self->complete) return nullptr;  // StopIteration
  if (!StreamIsSetUp(self)) return nullptr;
  if (self->forwarder != Py_None) {  // a response_queue: the iterator reads what it forwards
    return DeliverResponse(self, PyObject_CallMethodObjArgs(o, next_forwarded_name, nullptr));
  }
  // Held for the wait, which releases the GIL: another thread calling
  // _setup meanwhile cannot free what it waits on.
  py::object request = py::reinterpret_borrow<py::object>(self->request);
  py::object model = py::reinterpret_borrow<py::object>(self->model);
  py::object request_id = py::reinterpret_borrow<py::object>(self->request_id);
  return DeliverResponse(self, WaitForResponse(request.ptr(), model.ptr(), request_id.ptr()));
}

PyObject* Iter(PyObject* o) {
  Py_INCREF(o);
  return o;
}

int Traverse(PyObject* o, visitproc visit, void* arg) {
  StreamObject* self = AsStream(o);
  Py_VISIT(Py_TYPE(o));  // a heap type
  Py_VISIT(self->model);
  Py_VISIT(self->request);
  Py_VISIT(self->request_id);
  Py_VISIT(self->forwarder);
  return 0;
}

int Clear(PyObject* o) {
  StreamObject* self = AsStream(o);
  Py_CLEAR(self->model);
  Py_CLEAR(self->request);
  Py_CLEAR(self->request_id);
  Py_CLEAR(self->forwarder);
  return 0;
}

void Dealloc(PyObject* o) {
  PyTypeObject* type = Py_TYPE(o);
  PyObject_GC_UnTrack(o);
  if (AsStream(o)->weakrefs != nullptr) PyObject_ClearWeakRefs(o);
  Clear(o);  // dropping the request cancels it when it has not ended
  type->tp_free(o);
  Py_DECREF(type);  // a heap type: each instance holds a reference
}

PyMethodDef stream_methods[] = {
    {"_sent", pyinterop::AsMethod(&Sent), METH_FASTCALL | METH_CLASS,
     "_sent($cls, model, request, raise_on_error, /)\n--\n\n"
     "An iterator over the responses of `request`, already sent, with no id and no "
     "response queue."},
    {"_setup", pyinterop::AsMethod(&SetupMethod), METH_FASTCALL,
     "_setup($self, model, request, request_id, raise_on_error, forwarder, /)\n--\n\n"
     "Set what the iterator reads: `request`'s responses, as of `model`."},
    {"_deliver", &DeliverMethod, METH_O,
     "_deliver($self, response, /)\n--\n\n"
     "`response`, noting the end at the final one; its error raised instead when the "
     "iterator raises on errors."},
    {"cancel", &Cancel, METH_NOARGS,
     "cancel($self, /)\n--\n\n"
     "Ask the core to cancel the request (best effort: it may still run, or have run). "
     "An iterator dropped before its final response cancels its request, unless a "
     "response_queue still receives its responses."},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef stream_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(StreamObject, weakrefs), READONLY, nullptr},
    {"_model", T_OBJECT_EX, offsetof(StreamObject, model), READONLY, nullptr},
    {"_request", T_OBJECT_EX, offsetof(StreamObject, request), READONLY, nullptr},
    {"_request_id", T_OBJECT_EX, offsetof(StreamObject, request_id), READONLY, nullptr},
    {"_forwarder", T_OBJECT_EX, offsetof(StreamObject, forwarder), READONLY, nullptr},
    {"_raise_on_error", T_BOOL, offsetof(StreamObject, raise_on_error), READONLY, nullptr},
    {"_complete", T_BOOL, offsetof(StreamObject, complete), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot stream_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(&Dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(&Traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(&Clear)},
    {Py_tp_methods, stream_methods},
    {Py_tp_members, stream_members},
    {Py_tp_doc, const_cast<char*>("What a response iterator reads: the base of "
                                  "tritonserver's ResponseIterator and AsyncResponseIterator.")},
    {0, nullptr}};

PyType_Spec stream_spec = {"tritonserver._c.triton_bindings.ResponseStream", sizeof(StreamObject),
                           0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
                           stream_slots};

PyType_Slot sync_stream_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(&Dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(&Traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(&Clear)},
    {Py_tp_iter, reinterpret_cast<void*>(&Iter)},
    {Py_tp_iternext, reinterpret_cast<void*>(&Next)},
    {Py_tp_doc, const_cast<char*>("A ResponseStream iterated synchronously: the base of "
                                  "tritonserver's ResponseIterator.")},
    {0, nullptr}};

PyType_Spec sync_stream_spec = {
    "tritonserver._c.triton_bindings.SyncResponseStream", sizeof(StreamObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, sync_stream_slots};

// ---- The fast path: send_inputs and Model.infer -----------------------------------
//
// tritonserver._submit.send_inputs is this binding's function (inputs_sender):
// `model.infer(inputs={name: array, ...})` and `model.async_infer(...)` at
// their fastest, the checks that they may take it (default allocators as
// shipped, no trace that may sample, a started server) and the send with
// send_arrays, in one place. The attributes the checks read are named by
// tritonserver._submit.FAST_PATH_READS, never here. tritonserver._model sets Model.infer to a
// method of this binding (model_infer_method) that does the same and returns the ResponseIterator
// as `_sent` makes it, with no Python frame: the call of nearly every synchronous program. Every
// other call, and this one whenever a check fails, goes to the Python method it replaced, which
// stays the one answer to them.

struct FastPath {
  py::object defaults;  // tritonserver.default_memory_allocators
  py::object inputs;    // Model.infer's keyword, interned
  // What the checks read, interned from tritonserver._submit.FAST_PATH_READS
  // (the one place that names them): the model's Registries, name and
  // version; the registries' handle and trace settings; whether those may
  // sample; whether the default allocators are as shipped.
  py::object model_registries, model_name, model_version, handle, made_tracing, tracing_active,
      allocators_as_shipped;
};

struct ModelInfer {
  py::object fallback;  // the Python Model.infer
  py::object iterator;  // ResponseIterator
};

FastPath* fast_path = nullptr;      // kept for the process (inputs_sender)
ModelInfer* model_infer = nullptr;  // kept for the process (model_infer_method)

// getattr(o, name), or null with no error set.
py::object Attribute(PyObject* o, const py::object& name) {
  PyObject* value = PyObject_GetAttr(o, name.ptr());
  if (value == nullptr) PyErr_Clear();
  return py::reinterpret_steal<py::object>(value);
}

// The binding's request of `inputs` for `model`, sent, when the fast path
// may take it; None (nothing sent) when not; null with an error set when
// sending failed. A new reference.
PyObject* SendInputs(const FastPath& f, PyObject* model, PyObject* inputs) {
  if (!PyDict_CheckExact(inputs)) Py_RETURN_NONE;
  py::object shipped = Attribute(f.defaults.ptr(), f.allocators_as_shipped);
  if (shipped.ptr() != Py_True) Py_RETURN_NONE;
  py::object registries = Attribute(model, f.model_registries);
  py::object tracing = registries ? Attribute(registries.ptr(), f.made_tracing) : py::object();
  if (!tracing) Py_RETURN_NONE;
  if (!tracing.is_none()) {
    py::object active = Attribute(tracing.ptr(), f.tracing_active);
    if (active.ptr() != Py_False) Py_RETURN_NONE;
  }
  // A stopped server's handle is None: the general path raises its error.
  py::object handle = Attribute(registries.ptr(), f.handle);
  py::object name = Attribute(model, f.model_name);
  py::object version = Attribute(model, f.model_version);
  if (!handle || handle.is_none() || !name || !version) Py_RETURN_NONE;
  return SendArrayInputs(handle.ptr(), name.ptr(), version.ptr(), inputs);
}

// send_inputs(model, inputs, /)
PyObject* SendInputsFunction(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!pyinterop::ArgumentCount("send_inputs", nargs, 2, 2)) return nullptr;
  return SendInputs(*fast_path, args[0], args[1]);
}

PyMethodDef send_inputs_def = {
    "send_inputs", pyinterop::AsMethod(&SendInputsFunction), METH_FASTCALL,
    "send_inputs(model, inputs, /)\n--\n\n"
    "Model.infer(inputs=...) at its fastest: when `inputs` is a dict of numpy arrays the "
    "binding reads in place, no allocator was put in default_memory_allocators and no trace "
    "may sample it, the binding's request made, filled and sent in one call; else None, and "
    "nothing was sent."};

// Model.infer(self, inference_request=None, raise_on_error=True, **kwargs)
PyObject* ModelInferMethod(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                           PyObject* kwnames) {
  const ModelInfer& m = *model_infer;
  if (PyObject* inputs = InputsOnly(args, nargs, kwnames)) {
    PyObject* request = SendInputs(*fast_path, self, inputs);
    if (request == nullptr) return nullptr;
    if (request != Py_None) {
      PyObject* iterator =
          NewSentStream(reinterpret_cast<PyTypeObject*>(m.iterator.ptr()), self, request, Py_True);
      Py_DECREF(request);  // the iterator holds it (or, on failure, dropping it cancels it)
      return iterator;
    }
    Py_DECREF(request);
  }
  return pyinterop::CallWithSelf(m.fallback.ptr(), self, args, nargs, kwnames);
}

PyMethodDef model_infer_def = {
    "infer", pyinterop::AsMethod(&ModelInferMethod), METH_FASTCALL | METH_KEYWORDS,
    "infer($self, /, inference_request=None, raise_on_error=True, **kwargs)\n--\n\n"
    "Send a request; returns an iterator over its responses."};

// inputs_sender(defaults, reads): `reads` maps each role of FastPath to the
// attribute name it reads, every role and nothing else.
py::object InputsSender(py::object defaults, const py::dict& reads, py::module_ m) {
  using Member = py::object FastPath::*;
  const std::pair<const char*, Member> roles[] = {
      {"model_registries", &FastPath::model_registries},
      {"model_name", &FastPath::model_name},
      {"model_version", &FastPath::model_version},
      {"handle", &FastPath::handle},
      {"made_tracing", &FastPath::made_tracing},
      {"tracing_active", &FastPath::tracing_active},
      {"allocators_as_shipped", &FastPath::allocators_as_shipped}};
  if (reads.size() != std::size(roles)) {
    throw py::value_error("reads must name the fast path's " + std::to_string(std::size(roles)) +
                          " attributes and nothing else");
  }
  auto f = std::make_unique<FastPath>();
  f->defaults = std::move(defaults);
  f->inputs = py::reinterpret_steal<py::object>(InternedName("inputs"));
  for (const auto& [role, member] : roles) {
    if (!reads.contains(role)) throw py::value_error(std::string("reads lacks '") + role + "'");
    py::object name = reads[role];
    if (!PyUnicode_Check(name.ptr())) {
      throw py::type_error(std::string("reads['") + role + "'] must be a str");
    }
    PyObject* interned = name.release().ptr();
    PyUnicode_InternInPlace(&interned);
    f.get()->*member = py::reinterpret_steal<py::object>(interned);
  }
  PyObject* function = PyCFunction_NewEx(&send_inputs_def, nullptr, m.attr("__name__").ptr());
  if (function == nullptr) throw py::error_already_set();
  fast_path = f.release();  // a later call (a reloaded module) replaces it; the old one stays
  return py::reinterpret_steal<py::object>(function);
}

// model_infer_method(model, fallback, iterator)
py::object ModelInferMethodFor(py::object model, py::object fallback, py::object iterator) {
  if (fast_path == nullptr) {
    throw py::type_error("inputs_sender() must make send_inputs before Model.infer");
  }
  if (!PyType_Check(model.ptr()) || !PyType_Check(iterator.ptr())) {
    throw py::type_error("model and iterator must be classes");
  }
  auto method =
      py::reinterpret_steal<py::object>(pyinterop::MethodOf(model.ptr(), &model_infer_def));
  if (!method) throw py::error_already_set();
  model_infer = new ModelInfer{std::move(fallback), std::move(iterator)};  // as fast_path
  return method;
}

}  // namespace

PyObject* InternedName(const char* name) {
  PyObject* s = PyUnicode_InternFromString(name);
  if (s == nullptr) throw py::error_already_set();
  return s;
}

PyObject* InputsOnly(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (nargs != 0 || kwnames == nullptr || PyTuple_GET_SIZE(kwnames) != 1) return nullptr;
  PyObject* keyword = PyTuple_GET_ITEM(kwnames, 0);
  PyObject* inputs = fast_path->inputs.ptr();
  return keyword == inputs || PyUnicode_Compare(keyword, inputs) == 0 ? args[0] : nullptr;
}

PyObject* SendInputsFast(PyObject* model, PyObject* inputs) {
  return SendInputs(*fast_path, model, inputs);
}

void RegisterResponseStream(py::module_& m) {
  final_name = InternedName("final");
  error_name = InternedName("error");
  next_forwarded_name = InternedName("_next_forwarded");
  cancel_name = InternedName("cancel");
  py::object base = py::reinterpret_steal<py::object>(PyType_FromSpec(&stream_spec));
  if (!base) throw py::error_already_set();
  // A tuple of bases: Python 3.9 takes no single class there.
  py::tuple bases = py::make_tuple(base);
  py::object sync =
      py::reinterpret_steal<py::object>(PyType_FromSpecWithBases(&sync_stream_spec, bases.ptr()));
  if (!sync) throw py::error_already_set();
  m.add_object("ResponseStream", base);
  m.add_object("SyncResponseStream", sync);
  RegisterAsyncResponseStream(m, base.ptr());
  m.def(
      "inputs_sender",
      [m](py::object defaults, const py::dict& reads) {
        return InputsSender(std::move(defaults), reads, m);
      },
      py::arg("defaults"), py::arg("reads"),
      "send_inputs, the fast path's sender (tritonserver._submit); `defaults`: "
      "tritonserver.default_memory_allocators; `reads`: the attribute names the checks "
      "read, by role (tritonserver._submit.FAST_PATH_READS).");
  m.def("model_infer_method", &ModelInferMethodFor, py::arg("model"), py::arg("fallback"),
        py::arg("iterator"),
        "Model.infer in C for `model` (the class): send_inputs, then an `iterator` "
        "(ResponseIterator) as _sent makes it; `fallback` (the Python method) takes every "
        "other call. After inputs_sender.");
}

}  // namespace tritonpy
