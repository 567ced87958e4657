#include "bindings/request.h"

#include <pybind11/stl.h>
#include <pybind11/typing.h>
#include <structmember.h>

#include <cstddef>
#include <new>

#include "bindings/allocator.h"
#include "bindings/deferred_delete.h"
#include "bindings/errors.h"
#include "bindings/first_response.h"
#include "bindings/loop_notifier.h"
#include "bindings/response_objects.h"
#include "core_api.h"
#include "pyinterop/fastcall.h"

namespace py = pybind11;

namespace tritonpy {

Request::Request(const Server& server, std::string model, int64_t version)
    : server_(server.Handle()),
      model_(std::move(model)),
      version_(version),
      queue_(std::make_shared<ResponseQueue>()) {}

bool Request::sent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sent_;
}

// A request may die on a core thread (OnRelease): the owned references take
// the GIL to drop their objects.
Request::~Request() = default;

void Request::Unsent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (sent_) {
    throw Error(TRITONSERVER_ERROR_INVALID_ARG,
                "an inference request cannot change after it was sent");
  }
}

void Request::SetParameters(const pyinterop::PyParameters& parameters) {
  Unsent();
  pyinterop::Parameters parsed =
      pyinterop::ParametersFromPython(parameters, pyinterop::ParameterUse::kRequest);
  for (auto& item : parsed) parameters_.push_back(std::move(item));
}

void Request::SetAllocator(py::object allocator, int preferred_type, int64_t preferred_id) {
  Unsent();
  allocator_ = pyinterop::OwnedRef(std::move(allocator));
  preferred_type_ = preferred_type;
  preferred_id_ = preferred_id;
}

void Request::AddInput(Input input, py::object owner) {
  Unsent();
  inputs_.push_back(std::move(input));
  if (!owner.is_none()) {
    std::lock_guard<std::mutex> lock(mutex_);
    owners_.emplace_back(std::move(owner));
  }
}

namespace {

void AppendDataTo(TRITONSERVER_InferenceRequest* r, const Request::Input& in) {
  Check(Core().TRITONSERVER_InferenceRequestAppendInputData(
      r, in.name.c_str(), reinterpret_cast<const void*>(in.data_ptr), in.byte_size,
      static_cast<TRITONSERVER_MemoryType>(in.memory_type), in.memory_type_id));
}

void AddInputTo(TRITONSERVER_InferenceRequest* r, const Request::Input& in) {
  Check(Core().TRITONSERVER_InferenceRequestAddInput(
      r, CString(in.name, "input name"), static_cast<TRITONSERVER_DataType>(in.datatype),
      in.shape.data(), in.shape.size()));
  AppendDataTo(r, in);
}

void AddOutputTo(TRITONSERVER_InferenceRequest* r, const std::string& name) {
  Check(
      TRITON_FN(TRITONSERVER_InferenceRequestAddRequestedOutput)(r, CString(name, "output name")));
}

PooledInput Held(const Request::Input& in) {
  return {in.name, in.datatype, in.shape, in.byte_size};
}

// Whether new data can go into the inputs a kept request holds (PooledInput).
bool SameInputs(const std::vector<PooledInput>& held, const std::vector<Request::Input>& inputs) {
  if (held.size() != inputs.size()) return false;
  for (size_t i = 0; i < held.size(); ++i) {
    const Request::Input& in = inputs[i];
    if (in.datatype == TRITONSERVER_TYPE_BYTES || held[i].datatype != in.datatype ||
        held[i].byte_size != in.byte_size || held[i].shape != in.shape || held[i].name != in.name) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool Request::Plain() const {
  return !id_ && flags_ == 0 && !correlation_id_ && priority_ == 0 && timeout_us_ == 0 &&
         parameters_.empty() && !allocator_ && trace_sink_ == nullptr;
}

RequestShape Request::Shape() const {
  RequestShape shape;
  shape.inputs.reserve(inputs_.size());
  for (const Input& in : inputs_) shape.inputs.push_back(Held(in));
  shape.outputs = outputs_;
  return shape;
}

void Request::Refill(PooledRequest& core) const {
  TRITONSERVER_InferenceRequest* r = core.request;
  if (SameInputs(core.shape.inputs, inputs_)) {  // the common case: new data only
    for (const Input& in : inputs_) {
      Check(TRITON_FN(TRITONSERVER_InferenceRequestRemoveAllInputData)(r, in.name.c_str()));
      AppendDataTo(r, in);
    }
  } else {
    Check(TRITON_FN(TRITONSERVER_InferenceRequestRemoveAllInputs)(r));
    core.shape.inputs.clear();
    for (const Input& in : inputs_) {
      AddInputTo(r, in);
      core.shape.inputs.push_back(Held(in));
    }
  }
  if (core.shape.outputs != outputs_) {
    Check(TRITON_FN(TRITONSERVER_InferenceRequestRemoveAllRequestedOutputs)(r));
    core.shape.outputs.clear();
    for (const std::string& name : outputs_) {
      AddOutputTo(r, name);
      core.shape.outputs.push_back(name);
    }
  }
}

// Applies everything recorded to a fresh core request.
void Request::Fill(TRITONSERVER_InferenceRequest* r) const {
  if (id_) Check(TRITON_FN(TRITONSERVER_InferenceRequestSetId)(r, CString(*id_, "request id")));
  if (flags_) Check(TRITON_FN(TRITONSERVER_InferenceRequestSetFlags)(r, flags_));
  if (correlation_id_) {
    if (const auto* n = std::get_if<uint64_t>(&*correlation_id_)) {
      Check(TRITON_FN(TRITONSERVER_InferenceRequestSetCorrelationId)(r, *n));
    } else {
      Check(TRITON_FN(TRITONSERVER_InferenceRequestSetCorrelationIdString)(
          r, CString(std::get<std::string>(*correlation_id_), "correlation id")));
    }
  }
  if (priority_) Check(TRITON_FN(TRITONSERVER_InferenceRequestSetPriorityUInt64)(r, priority_));
  if (timeout_us_) {
    Check(TRITON_FN(TRITONSERVER_InferenceRequestSetTimeoutMicroseconds)(r, timeout_us_));
  }
  for (const auto& [key, value] : parameters_) {
    const char* k = CString(key, "parameter name");
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>) {
            Check(TRITON_FN(TRITONSERVER_InferenceRequestSetBoolParameter)(r, k, v));
          } else if constexpr (std::is_same_v<T, int64_t>) {
            Check(TRITON_FN(TRITONSERVER_InferenceRequestSetIntParameter)(r, k, v));
          } else if constexpr (std::is_same_v<T, double>) {
            Check(TRITON_FN(TRITONSERVER_InferenceRequestSetDoubleParameter)(r, k, v));
          } else if constexpr (std::is_same_v<T, std::string>) {
            Check(TRITON_FN(TRITONSERVER_InferenceRequestSetStringParameter)(
                r, k, CString(v, "parameter value")));
          } else {
            throw Error(TRITONSERVER_ERROR_INVALID_ARG,
                        "request parameter '" + key + "' cannot be bytes");
          }
        },
        value);
  }
  for (const Input& in : inputs_) AddInputTo(r, in);
  for (const std::string& name : outputs_) AddOutputTo(r, name);
}

void Request::OnRelease(TRITONSERVER_InferenceRequest*, uint32_t flags, void* userp) {
  if (!(flags & TRITONSERVER_REQUEST_RELEASE_ALL)) return;
  auto* self = static_cast<Request*>(userp);
  std::shared_ptr<Request> keep;
  Released released;
  try {
    std::lock_guard<std::mutex> lock(self->mutex_);
    released.request = self->request_;
    self->request_ = nullptr;  // Cancel() no longer reaches it
    released.in_flight = std::move(self->in_flight_count_);
    released.server = self->server_.lock();
    released.bucket = std::move(self->bucket_);
    released.shape = std::move(self->core_shape_);
    keep = std::move(self->in_flight_);
  } catch (...) {
    // Called from C: nothing may unwind. Only locking can throw here, and
    // then the request is left to the process (never freed twice).
    return;
  }
  // Deleted and counted out on the binding's deleting thread, not on this
  // core thread (deferred_delete.h says why).
  DeleteLater(std::move(released));
  // The input data's owners stay with this object: they go when Python
  // lets go of it, under the GIL it holds then, instead of a thread waiting
  // for the GIL here.
}

void Request::Send() {
  Unsent();
  DeleteReleased();  // this Python thread deletes what was released meanwhile
  const CoreApi& api = Core();
  // Held only while the core takes the request.
  std::shared_ptr<ServerHandle> server = server_.lock();
  if (!server) throw Error(TRITONSERVER_ERROR_UNAVAILABLE, "the server is stopped");

  // A request of inputs and requested outputs only may go out in a core
  // request kept from an earlier one of the same model (request_pool.h).
  std::shared_ptr<PoolBucket> bucket;
  if (Plain()) bucket = server->pool().Bucket(server->get(), model_, version_);
  PooledRequest core;
  const bool reused = bucket != nullptr && bucket->Take(&core);
  if (!reused) {
    Check(TRITON_FN(TRITONSERVER_InferenceRequestNew)(&core.request, server->get(),
                                                      CString(model_, "model name"), version_));
  }
  TRITONSERVER_InferenceRequest* r = core.request;
  struct Unsubmitted {  // deletes the core request unless the core took it
    TRITONSERVER_InferenceRequest* r;
    ~Unsubmitted() {
      if (r != nullptr) ErrorPtr ignored(Core().TRITONSERVER_InferenceRequestDelete(r));
    }
  } guard{r};
  if (reused) {
    Refill(core);
  } else {
    Fill(r);
    if (bucket != nullptr) core.shape = Shape();
  }

  const std::shared_ptr<ResponseQueue>& queue = queue_;
  TRITONSERVER_ResponseAllocator* allocator = DefaultAllocator();
  void* allocator_userp = nullptr;
  if (allocator_) {
    queue->SetUserAllocator(
        std::make_unique<UserAllocator>(allocator_.object(), preferred_type_, preferred_id_));
    allocator = UserAllocator::CoreAllocator();
    allocator_userp = queue->user_allocator();
  }
  Check(api.TRITONSERVER_InferenceRequestSetResponseCallback(
      r, allocator, allocator_userp, &ResponseQueue::OnComplete, queue.get()));
  Check(api.TRITONSERVER_InferenceRequestSetReleaseCallback(r, &Request::OnRelease, this));
  // Last before sending: nothing may fail between creating the trace and
  // handing it over (or abandoning it below).
  TRITONSERVER_InferenceTrace* trace = nullptr;
  std::shared_ptr<TraceRecorder> recorder;
  if (trace_sink_ != nullptr && trace_level_ != 0) {
    recorder = TraceRecorder::Start(trace_level_, trace_sink_, &trace);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sent_ = true;
    request_ = r;
    trace_ = recorder;
    in_flight_ = shared_from_this();
    in_flight_count_ = server->in_flight();
    in_flight_count_->fetch_add(1);
    bucket_ = std::move(bucket);
    core_shape_ = std::move(core.shape);
  }
  queue->HoldUntilFinal(queue);
  if (server->time_first_response()) queue->TimeFirstResponse(FirstResponseHistogram::SteadyNs());
  TRITONSERVER_Error* err = nullptr;
  {
    // Callbacks may run on this very thread inside InferAsync (a cache hit,
    // an early error) and take the GIL; the core never needs ours.
    py::gil_scoped_release unlocked;
    err = api.TRITONSERVER_ServerInferAsync(server->get(), r, trace);
  }
  if (err != nullptr) {
    if (recorder != nullptr) recorder->Abandon();
    // Refused: no callback will come and the request is still ours.
    std::shared_ptr<Request> self;
    std::shared_ptr<TraceRecorder> refused_trace;  // goes after the lock
    {
      std::lock_guard<std::mutex> lock(mutex_);
      refused_trace = std::move(trace_);
      self = std::move(in_flight_);
      request_ = nullptr;
      sent_ = false;
      in_flight_count_->fetch_sub(1);
      in_flight_count_.reset();
      bucket_.reset();  // `guard` deletes the core request: it goes back nowhere
    }
    queue->Release();
    Check(err);  // `guard` deletes the request
  }
  server->Track(queue);
  guard.r = nullptr;  // the core's now, until OnRelease
}

bool Request::CaptureTimestamp(const std::string& name, uint64_t timestamp_ns) {
  std::shared_ptr<TraceRecorder> trace;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    trace = trace_;
  }
  if (trace == nullptr) return false;
  trace->Capture(name, timestamp_ns);
  return true;
}

void Request::Cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (request_ == nullptr) return;  // not sent, or released: nothing to cancel
  Check(TRITON_FN(TRITONSERVER_InferenceRequestCancel)(request_));
}

namespace {

// numpy.ndarray, {numpy dtype: DataType value} of the fixed-size types
// (tritonserver._datatypes' table) and the interned name "dtype", looked up
// once and kept for the process.
struct ArrayTypes {
  py::object ndarray;
  py::dict data_types;
  py::object dtype_name;
};

const ArrayTypes& Arrays() {
  static const ArrayTypes* types = new ArrayTypes{
      py::module_::import("numpy").attr("ndarray"),
      py::module_::import("tritonserver._datatypes").attr("data_type_by_dtype")().cast<py::dict>(),
      py::reinterpret_steal<py::object>(PyUnicode_InternFromString("dtype"))};
  return *types;
}

// Adds the inputs, in order, while they are C-contiguous numpy arrays of
// fixed-size types (read in place) under names that are UTF-8 strings;
// returns the names from the first other one on (for Python to convert or
// refuse, keeping the order), or None when it took them all.
py::typing::Optional<py::typing::List<py::str>> AddArrays(Request& request,
                                                          const py::dict& inputs) {
  const ArrayTypes& types = Arrays();
  py::object rest = py::none();
  for (auto [key, value] : inputs) {
    if (!rest.is_none()) {
      rest.cast<py::list>().append(key);
      continue;
    }
    PyObject* v = value.ptr();
    PyObject* data_type = nullptr;
    Py_buffer view;
    py::object dtype;
    const char* name = nullptr;
    Py_ssize_t name_size = 0;
    if (!PyUnicode_Check(key.ptr()) ||
        (name = PyUnicode_AsUTF8AndSize(key.ptr(), &name_size)) == nullptr ||
        Py_TYPE(v) != reinterpret_cast<PyTypeObject*>(types.ndarray.ptr()) ||
        !(dtype = py::reinterpret_steal<py::object>(PyObject_GetAttr(v, types.dtype_name.ptr()))) ||
        (data_type = PyDict_GetItemWithError(types.data_types.ptr(), dtype.ptr())) == nullptr ||
        PyObject_GetBuffer(v, &view, PyBUF_ND | PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Clear();
      rest = py::list();
      rest.cast<py::list>().append(key);
      continue;
    }
    Request::Input input{std::string(name, static_cast<size_t>(name_size)),
                         static_cast<int>(PyLong_AsLong(data_type)),
                         std::vector<int64_t>(view.shape, view.shape + view.ndim),
                         reinterpret_cast<uintptr_t>(view.buf),
                         static_cast<size_t>(view.len),
                         TRITONSERVER_MEMORY_CPU,
                         0};
    PyBuffer_Release(&view);
    // The array stays referenced (so its memory stays put) until the core
    // releases the request.
    request.AddInput(std::move(input), py::reinterpret_borrow<py::object>(value));
  }
  return rest;
}

// What Python holds of one request (see request.h).
class RequestOwner {
 public:
  RequestOwner(const Server& server, std::string model, int64_t version)
      : request_(std::make_shared<Request>(server, std::move(model), version)) {}
  ~RequestOwner() {
    try {
      // Most requests are finished when dropped: one lock, not two.
      if (!request_->queue()->finished() && request_->sent()) request_->Cancel();
    } catch (...) {  // a stopped server: nothing left to cancel
    }
  }
  RequestOwner(const RequestOwner&) = delete;
  RequestOwner& operator=(const RequestOwner&) = delete;

  Request& request() const { return *request_; }
  ResponseQueue& queue() const { return *request_->queue(); }

 private:
  std::shared_ptr<Request> request_;
};

// ---- InferenceRequest, the Python type ------------------------------------------
//
// A plain CPython type rather than a pybind11 class: one is made and dropped
// per inference, and pybind11's instance bookkeeping (its registry of live
// instances, the holder) with its argument dispatch cost about 1 µs of a
// 10 µs request (benchmarks/README.md). The methods of every request
// (send_arrays, pop_response, try_pop_response) take CPython's fast calling
// convention; the others are pybind11 functions set on the type as methods.

// clang-format would join PyObject_HEAD (a macro ending in a member) with the next line.
// clang-format off
struct RequestObject {
  PyObject_HEAD
  PyObject* weakrefs;
  bool constructed;  // `owner` holds a RequestOwner
  alignas(RequestOwner) unsigned char owner[sizeof(RequestOwner)];
};
// clang-format on

PyTypeObject* request_type = nullptr;

RequestOwner& OwnerOf(PyObject* o) {
  return *std::launder(reinterpret_cast<RequestOwner*>(reinterpret_cast<RequestObject*>(o)->owner));
}

const Server& ServerArgument(PyObject* server) {
  try {
    return py::cast<const Server&>(py::handle(server));
  } catch (const py::cast_error&) {
    throw py::type_error(std::string("server must be a Server, not ") + Py_TYPE(server)->tp_name);
  }
}

std::string StrArgument(PyObject* value, const char* what) {
  Py_ssize_t size = 0;
  const char* text = PyUnicode_Check(value) ? PyUnicode_AsUTF8AndSize(value, &size) : nullptr;
  if (text == nullptr) {
    if (!PyErr_Occurred()) {
      throw py::type_error(std::string(what) + " must be str, not " + Py_TYPE(value)->tp_name);
    }
    throw py::error_already_set();
  }
  return std::string(text, static_cast<size_t>(size));
}

int64_t IntArgument(PyObject* value) {
  const long long n = PyLong_AsLongLong(value);
  if (n == -1 && PyErr_Occurred()) throw py::error_already_set();
  return n;
}

// A new InferenceRequest (a new reference) for `model` of `server`.
PyObject* NewRequest(PyTypeObject* type, const Server& server, std::string model, int64_t version) {
  PyObject* o = type->tp_alloc(type, 0);
  if (o == nullptr) throw py::error_already_set();
  auto* self = reinterpret_cast<RequestObject*>(o);
  try {
    new (self->owner) RequestOwner(server, std::move(model), version);
  } catch (...) {
    Py_DECREF(o);  // not constructed: dealloc only frees it
    throw;
  }
  self->constructed = true;
  return o;
}

PyObject* RequestNew(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"server", "model", "version", nullptr};
  PyObject* server = nullptr;
  PyObject* model = nullptr;
  long long version = -1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OU|L:InferenceRequest", const_cast<char**>(names),
                                   &server, &model, &version)) {
    return nullptr;
  }
  try {
    return NewRequest(type, ServerArgument(server), StrArgument(model, "model"), version);
  } catch (...) {
    pyinterop::SetPythonErrorFromCurrent();
    return nullptr;
  }
}

void RequestDealloc(PyObject* o) {
  auto* self = reinterpret_cast<RequestObject*>(o);
  PyTypeObject* type = Py_TYPE(o);
  if (self->weakrefs != nullptr) PyObject_ClearWeakRefs(o);
  if (self->constructed) {
    // Cancelling may call into the core: whatever exception is being raised
    // right now stays as it was.
    PyObject *error_type, *error_value, *error_traceback;
    PyErr_Fetch(&error_type, &error_value, &error_traceback);
    OwnerOf(o).~RequestOwner();
    self->constructed = false;
    PyErr_Restore(error_type, error_value, error_traceback);
  }
  type->tp_free(o);
  Py_DECREF(type);  // a heap type: each instance holds a reference
}

// send_arrays(server, model, version, inputs, /)
PyObject* SendArrays(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!pyinterop::ArgumentCount("send_arrays", nargs, 4, 4)) return nullptr;
  return SendArrayInputs(args[0], args[1], args[2], args[3]);
}

// The response `take` pops from a request's queue as an InferenceResponse of
// `model` with `request_id` as its id when the core gives none; None when
// nothing was popped.
template <typename Take>
PyObject* PoppedResponse(Take take, PyObject* model, PyObject* request_id) {
  try {
    std::unique_ptr<ResponseRecord> record = take();
    if (!record) Py_RETURN_NONE;
    return RecordToResponse(*record, model, request_id).release().ptr();
  } catch (...) {
    pyinterop::SetPythonErrorFromCurrent();
    return nullptr;
  }
}

// pop_response(model, request_id, timeout=-1.0, /)
PyObject* PopResponse(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (!pyinterop::ArgumentCount("pop_response", nargs, 2, 3)) return nullptr;
  double timeout = -1.0;
  if (nargs == 3) {
    timeout = PyFloat_AsDouble(args[2]);
    if (timeout == -1.0 && PyErr_Occurred()) return nullptr;
  }
  return PoppedResponse([&] { return OwnerOf(self).queue().Take(timeout); }, args[0], args[1]);
}

// try_pop_response(model, request_id, /)
PyObject* TryPopResponse(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (!pyinterop::ArgumentCount("try_pop_response", nargs, 2, 2)) return nullptr;
  return TakeArrivedResponse(self, args[0], args[1]);
}

PyMethodDef request_methods[] = {
    {"send_arrays", pyinterop::AsMethod(&SendArrays), METH_FASTCALL | METH_STATIC,
     "send_arrays(server, model, version, inputs, /)\n--\n\n"
     "A request of these inputs, sent, when they are all C-contiguous numpy arrays of "
     "fixed-size types (add_arrays); else None, and nothing is sent."},
    {"pop_response", pyinterop::AsMethod(&PopResponse), METH_FASTCALL,
     "pop_response($self, model, request_id, timeout=-1.0, /)\n--\n\n"
     "Wait (without the GIL) for the next response, as try_pop_response; None on timeout."},
    {"try_pop_response", pyinterop::AsMethod(&TryPopResponse), METH_FASTCALL,
     "try_pop_response($self, model, request_id, /)\n--\n\n"
     "The next response as an InferenceResponse of `model`, or None when none has "
     "arrived; `request_id` is its id when the core gives none."},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef request_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(RequestObject, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot request_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(&RequestNew)},
    {Py_tp_dealloc, reinterpret_cast<void*>(&RequestDealloc)},
    {Py_tp_methods, request_methods},
    {Py_tp_members, request_members},
    {Py_tp_doc,
     const_cast<char*>(
         "InferenceRequest(server, model, version=-1)\n--\n\n"
         "One request: what to send to one model, sent once; then the queue its responses "
         "arrive in. Dropped before its final response, it is cancelled.")},
    {0, nullptr}};

PyType_Spec request_spec = {"tritonserver._c.triton_bindings.InferenceRequest",
                            sizeof(RequestObject), 0, Py_TPFLAGS_DEFAULT, request_slots};

// The request behind `self`, for the methods bound with pybind11.
RequestOwner& Self(py::handle self) {
  if (!PyObject_TypeCheck(self.ptr(), request_type)) {
    throw py::type_error(std::string("expected an InferenceRequest, not ") +
                         Py_TYPE(self.ptr())->tp_name);
  }
  return OwnerOf(self.ptr());
}

// Whether `o` is a binding InferenceRequest; if not, a TypeError is set.
bool IsRequest(PyObject* o) {
  if (PyObject_TypeCheck(o, request_type)) return true;
  PyErr_Format(PyExc_TypeError, "expected an InferenceRequest, not %s", Py_TYPE(o)->tp_name);
  return false;
}

}  // namespace

PyObject* WaitForResponse(PyObject* request, PyObject* model, PyObject* request_id) {
  if (!IsRequest(request)) return nullptr;
  return PoppedResponse([&] { return OwnerOf(request).queue().Take(-1.0); }, model, request_id);
}

PyObject* TakeArrivedResponse(PyObject* request, PyObject* model, PyObject* request_id) {
  if (!IsRequest(request)) return nullptr;
  return PoppedResponse([&] { return OwnerOf(request).queue().TryTake(); }, model, request_id);
}

int WatchNextResponse(PyObject* request, LoopNotifier& notifier, PyObject* future) {
  if (!IsRequest(request)) return -1;
  try {
    return notifier.Watch(OwnerOf(request).queue(), py::reinterpret_borrow<py::object>(future)) ? 1
                                                                                                : 0;
  } catch (...) {
    pyinterop::SetPythonErrorFromCurrent();
    return -1;
  }
}

PyObject* SendArrayInputs(PyObject* server, PyObject* model, PyObject* version, PyObject* inputs) {
  if (!PyDict_Check(inputs)) {
    PyErr_Format(PyExc_TypeError, "inputs must be a dict, not %s", Py_TYPE(inputs)->tp_name);
    return nullptr;
  }
  try {
    py::object request = py::reinterpret_steal<py::object>(NewRequest(
        request_type, ServerArgument(server), StrArgument(model, "model"), IntArgument(version)));
    RequestOwner& owner = OwnerOf(request.ptr());
    if (!AddArrays(owner.request(), py::reinterpret_borrow<py::dict>(inputs)).is_none()) {
      Py_RETURN_NONE;  // nothing was sent
    }
    owner.request().Send();
    return request.release().ptr();
  } catch (...) {
    pyinterop::SetPythonErrorFromCurrent();
    return nullptr;
  }
}

void RegisterRequest(py::module_& m) {
  PyObject* type = PyType_FromSpec(&request_spec);
  if (type == nullptr) throw py::error_already_set();
  request_type = reinterpret_cast<PyTypeObject*>(type);  // kept for the process
  py::object cls = py::reinterpret_borrow<py::object>(type);
  m.add_object("InferenceRequest", cls);
  // The other methods: pybind11 functions whose first argument is the request.
  auto method = [&cls](const char* name, auto&& f, auto&&... extra) {
    cls.attr(name) = py::cpp_function(std::forward<decltype(f)>(f), py::name(name),
                                      py::is_method(cls), std::forward<decltype(extra)>(extra)...);
  };
  using H = py::handle;
  method(
      "set_id", [](H r, std::string v) { Self(r).request().SetId(std::move(v)); },
      py::arg("request_id"));
  method("set_flags", [](H r, uint32_t v) { Self(r).request().SetFlags(v); }, py::arg("flags"));
  method(
      "set_correlation_id", [](H r, uint64_t v) { Self(r).request().SetCorrelationId(v); },
      py::arg("correlation_id"));
  method(
      "set_correlation_id_string",
      [](H r, std::string v) { Self(r).request().SetCorrelationId(std::move(v)); },
      py::arg("correlation_id"));
  method(
      "set_priority", [](H r, uint64_t v) { Self(r).request().SetPriority(v); },
      py::arg("priority"));
  method(
      "set_timeout_microseconds", [](H r, uint64_t v) { Self(r).request().SetTimeout(v); },
      py::arg("timeout_us"));
  method(
      "set_parameters",
      [](H r, const pyinterop::PyParameters& v) { Self(r).request().SetParameters(v); },
      py::arg("parameters"), "Request parameters: a dict of str to bool, int, float or str.");
  method(
      "add_input",
      [](H r, std::string name, int datatype, std::vector<int64_t> shape, uintptr_t data_ptr,
         size_t byte_size, int memory_type, int64_t memory_type_id, py::object owner) {
        Self(r).request().AddInput({std::move(name), datatype, std::move(shape), data_ptr,
                                    byte_size, memory_type, memory_type_id},
                                   std::move(owner));
      },
      py::arg("name"), py::arg("datatype"), py::arg("shape"), py::arg("data_ptr"),
      py::arg("byte_size"), py::arg("memory_type"), py::arg("memory_type_id"), py::arg("owner"));
  method(
      "add_arrays",
      [](H r, const py::dict& inputs) { return AddArrays(Self(r).request(), inputs); },
      py::arg("inputs"),
      "Add the inputs, in order, while they are C-contiguous numpy arrays of fixed-size "
      "types (read in place); returns the names from the first other one on, or None.");
  method(
      "add_requested_output",
      [](H r, std::string v) { Self(r).request().AddRequestedOutput(std::move(v)); },
      py::arg("name"));
  method(
      "set_allocator",
      [](H r, py::object allocator, int type, int64_t id) {
        Self(r).request().SetAllocator(std::move(allocator), type, id);
      },
      py::arg("allocator"), py::arg("preferred_type") = -1, py::arg("preferred_id") = 0);
  method(
      "set_trace",
      [](H r, uint32_t level, std::shared_ptr<TraceSink> sink) {
        Self(r).request().SetTrace(level, std::move(sink));
      },
      py::arg("level"), py::arg("sink"),
      "Send with a core trace at `level` (trace level flags); its records go to `sink`.");
  method(
      "set_classify", [](H r, bool v) { Self(r).queue().SetClassify(v); }, py::arg("classify"),
      "Read the first output's class labels of each response.");
  method(
      "set_label_outputs",
      [](H r, std::vector<std::string> names, bool batched) {
        Self(r).queue().SetLabelOutputs(std::move(names), batched);
      },
      py::arg("names"), py::arg("batched"),
      "Read the class labels of these outputs of each response, over one batch item (all "
      "but the first dimension when `batched`), into its output_labels.");
  method(
      "set_python_waker",
      [](H r, py::typing::Optional<py::typing::Callable<void()>> callable, bool always) {
        Self(r).queue().SetWaker(
            callable.is_none() ? nullptr : std::make_shared<PythonWaker>(std::move(callable)),
            always);
      },
      py::arg("callable"), py::arg("always") = true,
      "Call `callable` (on the core's thread, with the GIL) at every arrival, or only "
      "when armed; None stops.");
  method(
      "watch",
      [](H r, LoopNotifier& notifier, py::object future) {
        return notifier.Watch(Self(r).queue(), std::move(future));
      },
      py::arg("notifier"), py::arg("future"),
      "Complete `future` (on its loop, through `notifier`) at the next arrival; False "
      "when a response is already there.");
  method("send", [](H r) { Self(r).request().Send(); }, "Hand the request to the core.");
  method(
      "trace_timestamp",
      [](H r, const std::string& name, uint64_t timestamp_ns) {
        return Self(r).request().CaptureTimestamp(name, timestamp_ns);
      },
      py::arg("name"), py::arg("timestamp_ns"),
      "Record a timestamp (time.monotonic_ns(), the core's clock) in the request's trace; "
      "False when it was not sent with one. The trace is written once the core released "
      "it and this request is gone.");
  method("cancel", [](H r) { Self(r).request().Cancel(); });
  method(
      "arm", [](H r) { return Self(r).queue().Arm(); },
      "One wake-up at the next arrival; False when one is already there.");
}

}  // namespace tritonpy
