// AsyncResponseStream: the asynchronous response iterator's protocol in C.
//
// tritonserver._iterators.AsyncResponseIterator is a Python class built on
// this type. Its __aiter__ and __anext__ are the slots below: __anext__
// returns a NextResponse, an awaitable that takes the response when it has
// arrived and otherwise yields a future of the iterator's event loop to the
// task awaiting it, as `await future` would, completed through the loop's
// LoopNotifier at the next arrival. No Python frame runs for a response on
// that path; a response_queue's forwarder, and loops that cannot watch a
// file descriptor, go through the iterator's Python methods (_forwarded,
// _wait_on). NextResponse has send, throw and close besides __await__, so it
// is a collections.abc.Coroutine: asyncio.create_task(iterator.__anext__())
// takes it as it took the coroutine the Python method returned.
//
// Model.async_infer(inputs=...) at its fastest is here too: the running
// loop, send_inputs and the iterator made in one call.
#include <pybind11/pybind11.h>
#include <structmember.h>

#include <cstddef>

#include "bindings/loop_notifier.h"
#include "bindings/request.h"
#include "bindings/response_stream.h"
#include "pyinterop/fastcall.h"

namespace py = pybind11;

namespace tritonpy {
namespace {

// clang-format off
struct AsyncStreamObject {
  StreamObject base;
  PyObject* loop;              // _loop: the event loop its reader waits on
  PyObject* waiter;            // _waiter: the future a reader awaits now, or None
  PyObject* notifier;          // the loop's LoopNotifier; None: the loop watches no fd
  LoopNotifier* notifier_ptr;  // notifier's C++ object (null when None)
  char python_waker;           // _python_waker: set once waiting on a loop without add_reader
};

struct NextObject {
  PyObject_HEAD
  PyObject* stream;  // the AsyncStreamObject
  PyObject* waiter;  // the future yielded, until the task resumes this
  char done;         // returned or raised: awaited once only
};
// clang-format on

AsyncStreamObject* AsAsync(PyObject* o) { return reinterpret_cast<AsyncStreamObject*>(o); }
NextObject* AsNext(PyObject* o) { return reinterpret_cast<NextObject*>(o); }

PyTypeObject* next_type = nullptr;  // kept for the process
PyObject* create_future_name = nullptr;
PyObject* future_blocking_name = nullptr;
PyObject* forwarded_name = nullptr;
PyObject* wait_on_name = nullptr;
PyObject* get_running_loop = nullptr;  // asyncio.get_running_loop

// ---- Each loop's LoopNotifier ---------------------------------------------------
//
// tritonserver._iterators gives the lookup (set_loop_notifiers): a loop's
// LoopNotifier, made at its first use, or None. The last answer is kept for
// as long as its loop lives: a program nearly always asks for one loop.

PyObject* notifier_lookup = nullptr;
struct {
  PyObject* loop_ref = nullptr;  // a weak reference to the loop; its death clears this
  PyObject* notifier = nullptr;
  LoopNotifier* notifier_ptr = nullptr;
} last_loop;
PyObject* forget_loop = nullptr;  // the weak reference's callback

void ForgetLastLoop() {
  PyObject* ref = last_loop.loop_ref;
  PyObject* notifier = last_loop.notifier;
  last_loop.loop_ref = nullptr;
  last_loop.notifier = nullptr;
  last_loop.notifier_ptr = nullptr;
  Py_XDECREF(ref);
  Py_XDECREF(notifier);
}

PyObject* ForgetLoop(PyObject*, PyObject* ref) {
  if (ref == last_loop.loop_ref) ForgetLastLoop();
  Py_RETURN_NONE;
}

PyMethodDef forget_loop_def = {"_forget_loop", &ForgetLoop, METH_O, nullptr};

bool RefersTo(PyObject* ref, PyObject* o) {
#if PY_VERSION_HEX >= 0x030D0000
  PyObject* target = nullptr;
  if (PyWeakref_GetRef(ref, &target) < 0) {
    PyErr_Clear();
    return false;
  }
  const bool same = target == o;
  Py_XDECREF(target);
  return same;
#else
  return PyWeakref_GetObject(ref) == o;
#endif
}

// `loop`'s notifier (a new reference) and its C++ object; -1 with the error set.
int NotifierOf(PyObject* loop, PyObject** notifier, LoopNotifier** notifier_ptr) {
  if (last_loop.loop_ref != nullptr && RefersTo(last_loop.loop_ref, loop)) {
    Py_INCREF(last_loop.notifier);
    *notifier = last_loop.notifier;
    *notifier_ptr = last_loop.notifier_ptr;
    return 0;
  }
  if (notifier_lookup == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "set_loop_notifiers() was not called");
    return -1;
  }
  PyObject* found = PyObject_CallOneArg(notifier_lookup, loop);
  if (found == nullptr) return -1;
  LoopNotifier* ptr = nullptr;
  if (found != Py_None) {
    try {
      ptr = &py::cast<LoopNotifier&>(py::handle(found));
    } catch (const py::cast_error&) {
      PyErr_Format(PyExc_TypeError, "a loop's notifier must be a LoopNotifier, not %s",
                   Py_TYPE(found)->tp_name);
      Py_DECREF(found);
      return -1;
    }
  }
  PyObject* ref = PyWeakref_NewRef(loop, forget_loop);
  if (ref == nullptr) {
    PyErr_Clear();  // a loop that takes no weak reference is not remembered
  } else {
    ForgetLastLoop();
    last_loop.loop_ref = ref;
    Py_INCREF(found);
    last_loop.notifier = found;
    last_loop.notifier_ptr = ptr;
  }
  *notifier = found;
  *notifier_ptr = ptr;
  return 0;
}

// The stream waits on `loop` from now on, with no waiter made yet.
int SetLoop(AsyncStreamObject* self, PyObject* loop) {
  PyObject* notifier = nullptr;
  LoopNotifier* ptr = nullptr;
  if (NotifierOf(loop, &notifier, &ptr) < 0) return -1;
  Py_INCREF(loop);
  Py_XSETREF(self->loop, loop);
  Py_XSETREF(self->notifier, notifier);
  self->notifier_ptr = ptr;
  Py_INCREF(Py_None);
  Py_XSETREF(self->waiter, Py_None);
  self->python_waker = 0;
  return 0;
}

// ---- NextResponse: one __anext__ --------------------------------------------------

enum class Step { kReturn, kYield, kError };

void EndWait(NextObject* next) {
  if (next->waiter == nullptr) return;
  AsyncStreamObject* stream = AsAsync(next->stream);
  if (stream != nullptr && stream->waiter == next->waiter) {
    Py_INCREF(Py_None);
    Py_XSETREF(stream->waiter, Py_None);
  }
  Py_CLEAR(next->waiter);
}

// Whether a reader waiting on `waiter` will be woken at the next arrival:
// 1 yes, 0 a response is there already, -1 error.
int WaitOn(AsyncStreamObject* stream, PyObject* waiter) {
  if (stream->base.forwarder == Py_None && stream->notifier_ptr != nullptr) {  // the hot path
    return WatchNextResponse(stream->base.request, *stream->notifier_ptr, waiter);
  }
  PyObject* answer =
      PyObject_CallMethodOneArg(reinterpret_cast<PyObject*>(stream), wait_on_name, waiter);
  if (answer == nullptr) return -1;
  const int truth = PyObject_IsTrue(answer);
  Py_DECREF(answer);
  return truth;
}

// The response (kReturn), or a future to yield until it comes (kYield); the
// new reference in *out.
Step Advance(NextObject* next, PyObject** out) {
  *out = nullptr;
  if (next->done || next->stream == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited __anext__()");
    return Step::kError;
  }
  EndWait(next);  // resumed: the future completed
  AsyncStreamObject* stream = AsAsync(next->stream);
  StreamObject* base = &stream->base;
  for (;;) {
    PyObject* response = base->forwarder == Py_None
                             ? TakeArrivedResponse(base->request, base->model, base->request_id)
                             : PyObject_CallMethodNoArgs(next->stream, forwarded_name);
    if (response == nullptr) break;
    if (response != Py_None) {
      *out = DeliverResponse(base, response);
      if (*out == nullptr) break;
      next->done = 1;
      return Step::kReturn;
    }
    Py_DECREF(response);
    // Most responses are there by the time they are asked for; a future is
    // made only when one is not.
    PyObject* waiter = PyObject_CallMethodNoArgs(stream->loop, create_future_name);
    if (waiter == nullptr) break;
    const int waits = WaitOn(stream, waiter);
    // What `await future` does before it yields the future to its task.
    if (waits < 0 || (waits && PyObject_SetAttr(waiter, future_blocking_name, Py_True) < 0)) {
      Py_DECREF(waiter);
      break;
    }
    if (!waits) {
      Py_DECREF(waiter);
      continue;
    }
    Py_INCREF(waiter);
    Py_XSETREF(stream->waiter, waiter);
    Py_INCREF(waiter);
    next->waiter = waiter;
    *out = waiter;
    return Step::kYield;
  }
  next->done = 1;
  return Step::kError;
}

// The value of a finished step as an iterator returns it: the future to
// yield, or null with StopIteration(response) (or the error) set.
PyObject* AsIteratorResult(Step step, PyObject* value) {
  if (step != Step::kReturn) return value;
  PyObject* stop = PyObject_CallOneArg(PyExc_StopIteration, value);
  Py_DECREF(value);
  if (stop != nullptr) {
    PyErr_SetObject(PyExc_StopIteration, stop);
    Py_DECREF(stop);
  }
  return nullptr;
}

PyObject* NextIterNext(PyObject* o) {
  PyObject* value = nullptr;
  const Step step = Advance(AsNext(o), &value);
  return AsIteratorResult(step, value);
}

// send(value, /): the value is not used (a future's result is read from the queue).
PyObject* NextSend(PyObject* o, PyObject*) { return NextIterNext(o); }

#if PY_VERSION_HEX >= 0x030A0000
PySendResult NextAmSend(PyObject* o, PyObject*, PyObject** result) {
  switch (Advance(AsNext(o), result)) {
    case Step::kReturn:
      return PYGEN_RETURN;
    case Step::kYield:
      return PYGEN_NEXT;
    case Step::kError:
      break;
  }
  return PYGEN_ERROR;
}
#endif

// throw(type[, value[, traceback]]) or throw(exception): the wait ends and
// the exception is raised (a cancelled task's CancelledError, nearly always).
PyObject* NextThrow(PyObject* o, PyObject* const* args, Py_ssize_t nargs) {
  if (!pyinterop::ArgumentCount("throw", nargs, 1, 3)) return nullptr;
  NextObject* next = AsNext(o);
  EndWait(next);
  next->done = 1;
  PyObject* type = args[0];
  PyObject* value = nargs > 1 && args[1] != Py_None ? args[1] : nullptr;
  PyObject* traceback = nargs > 2 && args[2] != Py_None ? args[2] : nullptr;
  if (traceback != nullptr && !PyTraceBack_Check(traceback)) {
    PyErr_SetString(PyExc_TypeError, "throw() third argument must be a traceback object");
    return nullptr;
  }
  if (PyExceptionInstance_Check(type)) {
    if (value != nullptr) {
      PyErr_SetString(PyExc_TypeError, "instance exception may not have a separate value");
      return nullptr;
    }
    value = type;
    type = reinterpret_cast<PyObject*>(Py_TYPE(type));
    Py_INCREF(value);
  } else if (PyExceptionClass_Check(type)) {
    if (value != nullptr && PyObject_TypeCheck(value, reinterpret_cast<PyTypeObject*>(type))) {
      Py_INCREF(value);
    } else {
      value = value != nullptr ? PyObject_CallOneArg(type, value) : PyObject_CallNoArgs(type);
      if (value == nullptr) return nullptr;
    }
  } else {
    PyErr_Format(PyExc_TypeError,
                 "exceptions must be classes or instances deriving from BaseException, not %s",
                 Py_TYPE(type)->tp_name);
    return nullptr;
  }
  if (traceback != nullptr) PyException_SetTraceback(value, traceback);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(value)), value);
  Py_DECREF(value);
  return nullptr;
}

PyObject* NextClose(PyObject* o, PyObject*) {
  NextObject* next = AsNext(o);
  EndWait(next);
  next->done = 1;
  Py_RETURN_NONE;
}

PyObject* NextAwait(PyObject* o) {
  Py_INCREF(o);
  return o;
}

int NextTraverse(PyObject* o, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(o));
  Py_VISIT(AsNext(o)->stream);
  Py_VISIT(AsNext(o)->waiter);
  return 0;
}

int NextClear(PyObject* o) {
  Py_CLEAR(AsNext(o)->stream);
  Py_CLEAR(AsNext(o)->waiter);
  return 0;
}

void NextDealloc(PyObject* o) {
  PyTypeObject* type = Py_TYPE(o);
  PyObject_GC_UnTrack(o);
  NextClear(o);
  type->tp_free(o);
  Py_DECREF(type);
}

PyMethodDef next_methods[] = {
    {"send", &NextSend, METH_O,
     "send($self, value, /)\n--\n\nResume after the future completed (the value is not used)."},
    {"throw", pyinterop::AsMethod(&NextThrow), METH_FASTCALL,
     "throw($self, type, value=None, traceback=None, /)\n--\n\n"
     "End the wait and raise the exception."},
    {"close", &NextClose, METH_NOARGS, "close($self, /)\n--\n\nEnd the wait."},
    {nullptr, nullptr, 0, nullptr}};

PyType_Slot next_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(&NextDealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(&NextTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(&NextClear)},
    {Py_tp_iter, reinterpret_cast<void*>(&NextAwait)},
    {Py_tp_iternext, reinterpret_cast<void*>(&NextIterNext)},
    {Py_am_await, reinterpret_cast<void*>(&NextAwait)},
#if PY_VERSION_HEX >= 0x030A0000
    {Py_am_send, reinterpret_cast<void*>(&NextAmSend)},
#endif
    {Py_tp_methods, next_methods},
    {Py_tp_doc, const_cast<char*>("What AsyncResponseIterator.__anext__() returns: awaited, "
                                  "the next response.")},
    {0, nullptr}};

PyType_Spec next_spec = {"tritonserver._c.triton_bindings.NextResponse", sizeof(NextObject), 0,
                         Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, next_slots};

// ---- AsyncResponseStream ------------------------------------------------------------

PyObject* AsyncAiter(PyObject* o) {
  Py_INCREF(o);
  return o;
}

PyObject* AsyncAnext(PyObject* o) {
  AsyncStreamObject* self = AsAsync(o);
  // The end is raised here, with no awaitable made for it.
  if (self->base.complete) {
    PyErr_SetNone(PyExc_StopAsyncIteration);
    return nullptr;
  }
  if (!StreamIsSetUp(&self->base)) return nullptr;
  if (self->loop == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "the response iterator has no event loop");
    return nullptr;
  }
  NextObject* next = PyObject_GC_New(NextObject, next_type);
  if (next == nullptr) return nullptr;
  Py_INCREF(o);
  next->stream = o;
  next->waiter = nullptr;
  next->done = 0;
  PyObject_GC_Track(next);
  return reinterpret_cast<PyObject*>(next);
}

// _set_loop(loop, /)
PyObject* SetLoopMethod(PyObject* o, PyObject* loop) {
  if (SetLoop(AsAsync(o), loop) < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* base_type = nullptr;       // ResponseStream
PyTypeObject* async_type = nullptr;  // AsyncResponseStream

int AsyncTraverse(PyObject* o, visitproc visit, void* arg) {
  AsyncStreamObject* self = AsAsync(o);
  Py_VISIT(self->loop);
  Py_VISIT(self->waiter);
  Py_VISIT(self->notifier);
  return reinterpret_cast<PyTypeObject*>(base_type)->tp_traverse(o, visit, arg);
}

// Drops the fields this type adds to ResponseStream's.
void ClearOwnFields(AsyncStreamObject* self) {
  Py_CLEAR(self->loop);
  Py_CLEAR(self->waiter);
  self->notifier_ptr = nullptr;
  Py_CLEAR(self->notifier);
}

int AsyncClear(PyObject* o) {
  ClearOwnFields(AsAsync(o));
  return reinterpret_cast<PyTypeObject*>(base_type)->tp_clear(o);
}

void AsyncDealloc(PyObject* o) {
  PyObject_GC_UnTrack(o);
  ClearOwnFields(AsAsync(o));
  // The base's dealloc clears the rest (dropping the request cancels it when
  // it has not ended), frees the object and drops the type.
  reinterpret_cast<PyTypeObject*>(base_type)->tp_dealloc(o);
}

PyMethodDef async_methods[] = {
    {"_set_loop", &SetLoopMethod, METH_O,
     "_set_loop($self, loop, /)\n--\n\nWait on `loop`'s notifier from now on."},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef async_members[] = {
    {"_loop", T_OBJECT_EX, offsetof(AsyncStreamObject, loop), READONLY, nullptr},
    {"_waiter", T_OBJECT, offsetof(AsyncStreamObject, waiter), READONLY, nullptr},
    {"_python_waker", T_BOOL, offsetof(AsyncStreamObject, python_waker), 0, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot async_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(&AsyncDealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(&AsyncTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(&AsyncClear)},
    {Py_am_aiter, reinterpret_cast<void*>(&AsyncAiter)},
    {Py_am_anext, reinterpret_cast<void*>(&AsyncAnext)},
    {Py_tp_methods, async_methods},
    {Py_tp_members, async_members},
    {Py_tp_doc, const_cast<char*>("A ResponseStream iterated asynchronously: the base of "
                                  "tritonserver's AsyncResponseIterator.")},
    {0, nullptr}};

PyType_Spec async_spec = {
    "tritonserver._c.triton_bindings.AsyncResponseStream", sizeof(AsyncStreamObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, async_slots};

// ---- Model.async_infer ------------------------------------------------------------

struct ModelAsyncInfer {
  py::object fallback;  // the Python Model.async_infer
  py::object iterator;  // AsyncResponseIterator
};

ModelAsyncInfer* model_async_infer = nullptr;  // kept for the process

// Model.async_infer(self, inference_request=None, raise_on_error=True, **kwargs)
PyObject* ModelAsyncInferMethod(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                PyObject* kwnames) {
  const ModelAsyncInfer& m = *model_async_infer;
  if (PyObject* inputs = InputsOnly(args, nargs, kwnames)) {
    // Before sending: with no running loop, nothing is sent.
    PyObject* loop = PyObject_CallNoArgs(get_running_loop);
    if (loop == nullptr) return nullptr;
    PyObject* request = SendInputsFast(self, inputs);
    if (request != Py_None) {
      PyObject* iterator = request == nullptr
                               ? nullptr
                               : NewSentStream(reinterpret_cast<PyTypeObject*>(m.iterator.ptr()),
                                               self, request, Py_True);
      Py_XDECREF(request);  // the iterator holds it (or, on failure, dropping it cancels it)
      if (iterator != nullptr && SetLoop(AsAsync(iterator), loop) < 0) Py_CLEAR(iterator);
      Py_DECREF(loop);
      return iterator;
    }
    Py_DECREF(request);
    Py_DECREF(loop);
  }
  return pyinterop::CallWithSelf(m.fallback.ptr(), self, args, nargs, kwnames);
}

PyMethodDef model_async_infer_def = {
    "async_infer", pyinterop::AsMethod(&ModelAsyncInferMethod), METH_FASTCALL | METH_KEYWORDS,
    "async_infer($self, /, inference_request=None, raise_on_error=True, **kwargs)\n--\n\n"
    "Send a request; returns an asyncio iterator over its responses.\n\n"
    "Call it from a running event loop."};

// model_async_infer_method(model, fallback, iterator)
py::object ModelAsyncInferMethodFor(py::object model, py::object fallback, py::object iterator) {
  if (!PyType_Check(model.ptr()) || !PyType_Check(iterator.ptr())) {
    throw py::type_error("model and iterator must be classes");
  }
  if (!PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(iterator.ptr()), async_type)) {
    throw py::type_error("iterator must be built on AsyncResponseStream");
  }
  auto method =
      py::reinterpret_steal<py::object>(pyinterop::MethodOf(model.ptr(), &model_async_infer_def));
  if (!method) throw py::error_already_set();
  model_async_infer = new ModelAsyncInfer{std::move(fallback), std::move(iterator)};
  return method;
}

}  // namespace

void RegisterAsyncResponseStream(py::module_& m, PyObject* base) {
  create_future_name = InternedName("create_future");
  future_blocking_name = InternedName("_asyncio_future_blocking");
  forwarded_name = InternedName("_forwarded");
  wait_on_name = InternedName("_wait_on");
  get_running_loop =
      py::object(py::module_::import("asyncio").attr("get_running_loop")).release().ptr();
  forget_loop = PyCFunction_New(&forget_loop_def, nullptr);
  if (forget_loop == nullptr) throw py::error_already_set();
  PyObject* next = PyType_FromSpec(&next_spec);
  if (next == nullptr) throw py::error_already_set();
  next_type = reinterpret_cast<PyTypeObject*>(next);  // kept for the process
  m.add_object("NextResponse", py::reinterpret_borrow<py::object>(next));
  Py_INCREF(base);
  base_type = base;  // kept for the process
  py::tuple bases = py::make_tuple(py::reinterpret_borrow<py::object>(base));
  py::object type =
      py::reinterpret_steal<py::object>(PyType_FromSpecWithBases(&async_spec, bases.ptr()));
  if (!type) throw py::error_already_set();
  async_type = reinterpret_cast<PyTypeObject*>(type.inc_ref().ptr());  // kept for the process
  m.add_object("AsyncResponseStream", type);
  m.def(
      "set_loop_notifiers",
      [](py::object lookup) {
        PyObject* old = notifier_lookup;
        notifier_lookup = lookup.release().ptr();
        Py_XDECREF(old);
        ForgetLastLoop();
      },
      py::arg("lookup"),
      "How AsyncResponseStream finds an event loop's LoopNotifier: `lookup(loop)`, the "
      "notifier or None (a loop that cannot watch a file descriptor).");
  m.def("model_async_infer_method", &ModelAsyncInferMethodFor, py::arg("model"),
        py::arg("fallback"), py::arg("iterator"),
        "Model.async_infer in C for `model` (the class): the running loop, send_inputs, then "
        "an `iterator` (AsyncResponseIterator) over the sent request; `fallback` (the Python "
        "method) takes every other call. After inputs_sender.");
}

}  // namespace tritonpy
