#include "bindings/request.h"

#include <pybind11/stl.h>

#include "bindings/allocator.h"
#include "bindings/errors.h"
#include "bindings/gil.h"
#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {

Request::Request(const Server& server, const std::string& model,
                 int64_t version)
    : server_(server.Handle()) {
  Check(TRITON_FN(TRITONSERVER_InferenceRequestNew)(&request_, server.Raw(),
                                                    model.c_str(), version));
}

Request::~Request() {
  // A request that was never sent (or was refused) is still ours.
  if (request_ != nullptr) {
    ErrorPtr ignored(Core().TRITONSERVER_InferenceRequestDelete(request_));
  }
  DropOwners();
}

void Request::DropOwners() {
  std::vector<PyObject*> owners;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    owners.swap(owners_);
  }
  if (owners.empty()) return;
  GilFromAnyThread gil;  // Python references die with the GIL held
  if (!gil.held()) return;  // interpreter gone: leak rather than crash
  for (PyObject* o : owners) Py_DECREF(o);
}

TRITONSERVER_InferenceRequest* Request::Mutable() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (sent_ || request_ == nullptr) {
    throw TritonError(TRITONSERVER_ERROR_INVALID_ARG,
                      "an inference request cannot change after it was sent");
  }
  return request_;
}

void Request::AddInput(const std::string& name, int datatype,
                       const std::vector<int64_t>& shape, uintptr_t base,
                       size_t byte_size, int memory_type,
                       int64_t memory_type_id, py::object owner) {
  TRITONSERVER_InferenceRequest* r = Mutable();
  const CoreApi& api = Core();
  Check(api.TRITONSERVER_InferenceRequestAddInput(
      r, name.c_str(), static_cast<TRITONSERVER_DataType>(datatype),
      shape.data(), shape.size()));
  TRITONSERVER_Error* err = api.TRITONSERVER_InferenceRequestAppendInputData(
      r, name.c_str(), reinterpret_cast<const void*>(base), byte_size,
      static_cast<TRITONSERVER_MemoryType>(memory_type), memory_type_id);
  if (err != nullptr) {
    ErrorPtr ignored(api.TRITONSERVER_InferenceRequestRemoveInput(r, name.c_str()));
    Check(err);
  }
  if (!owner.is_none()) {
    std::lock_guard<std::mutex> lock(mutex_);
    owners_.push_back(owner.release().ptr());
  }
}

void Request::OnRelease(TRITONSERVER_InferenceRequest*, uint32_t flags,
                        void* userp) {
  if (!(flags & TRITONSERVER_REQUEST_RELEASE_ALL)) return;
  auto* self = static_cast<Request*>(userp);
  std::shared_ptr<Request> keep;
  {
    std::lock_guard<std::mutex> lock(self->mutex_);
    keep = std::move(self->in_flight_);
    // Deleting a request from its own release callback is allowed; doing it
    // now drops the core's references (the model) whatever Python still holds.
    ErrorPtr ignored(Core().TRITONSERVER_InferenceRequestDelete(self->request_));
    self->request_ = nullptr;
  }
  // The core reads no more input: the data's owners can go now.
  self->DropOwners();
}

std::shared_ptr<ResponseSink> Request::Send() {
  TRITONSERVER_InferenceRequest* r = Mutable();
  const CoreApi& api = Core();
  // Held only while the core takes the request.
  std::shared_ptr<ServerHandle> server = server_.lock();
  if (!server) {
    throw TritonError(TRITONSERVER_ERROR_UNAVAILABLE, "the server is stopped");
  }
  auto sink = std::make_shared<ResponseSink>();
  auto* holder = new std::shared_ptr<ResponseSink>(sink);
  TRITONSERVER_Error* err = api.TRITONSERVER_InferenceRequestSetResponseCallback(
      r, DefaultAllocator(), nullptr, &ResponseSink::OnComplete, holder);
  if (err == nullptr) {
    err = api.TRITONSERVER_InferenceRequestSetReleaseCallback(r, &Request::OnRelease, this);
  }
  if (err != nullptr) {
    delete holder;
    Check(err);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sent_ = true;
    in_flight_ = shared_from_this();
  }
  {
    // Callbacks may run on this very thread inside InferAsync (a cache hit,
    // an early error) and take the GIL; the core never needs ours.
    py::gil_scoped_release unlocked;
    err = api.TRITONSERVER_ServerInferAsync(server->get(), r, nullptr);
  }
  if (err != nullptr) {
    // Refused: no callback will come; ownership stays with us.
    std::shared_ptr<Request> self;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      self = std::move(in_flight_);
      sent_ = false;
    }
    delete holder;
    Check(err);
  }
  return sink;
}

void Request::Cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (request_ == nullptr || !sent_) return;  // released already: nothing to cancel
  Check(TRITON_FN(TRITONSERVER_InferenceRequestCancel)(request_));
}

void RegisterRequest(py::module_& m) {
  using R = Request;
  using Str = const std::string&;
  py::class_<Request, std::shared_ptr<Request>>(m, "InferenceRequest")
      .def(py::init<const Server&, Str, int64_t>(), py::arg("server"), py::arg("model"),
           py::arg("version") = -1)
      .def("set_id", [](R& r, Str v) {
        Check(TRITON_FN(TRITONSERVER_InferenceRequestSetId)(r.Mutable(), v.c_str()));
      })
      .def("set_flags", [](R& r, uint32_t v) {
        Check(TRITON_FN(TRITONSERVER_InferenceRequestSetFlags)(r.Mutable(), v));
      })
      .def("set_correlation_id", [](R& r, uint64_t v) {
        Check(TRITON_FN(TRITONSERVER_InferenceRequestSetCorrelationId)(r.Mutable(), v));
      })
      .def("set_correlation_id_string", [](R& r, Str v) {
        Check(TRITON_FN(TRITONSERVER_InferenceRequestSetCorrelationIdString)(r.Mutable(),
                                                                             v.c_str()));
      })
      .def("set_priority", [](R& r, uint64_t v) {
        Check(TRITON_FN(TRITONSERVER_InferenceRequestSetPriorityUInt64)(r.Mutable(), v));
      })
      .def("set_timeout_microseconds", [](R& r, uint64_t v) {
        Check(TRITON_FN(TRITONSERVER_InferenceRequestSetTimeoutMicroseconds)(r.Mutable(), v));
      })
      .def("add_input", &Request::AddInput, py::arg("name"), py::arg("datatype"),
           py::arg("shape"), py::arg("data_ptr"), py::arg("byte_size"),
           py::arg("memory_type"), py::arg("memory_type_id"), py::arg("owner"))
      .def("add_requested_output", [](R& r, Str name) {
        Check(TRITON_FN(TRITONSERVER_InferenceRequestAddRequestedOutput)(r.Mutable(),
                                                                         name.c_str()));
      })
      .def("set_string_parameter", [](R& r, Str k, Str v) {
        Check(TRITON_FN(TRITONSERVER_InferenceRequestSetStringParameter)(r.Mutable(), k.c_str(),
                                                                         v.c_str()));
      })
      .def("set_int_parameter", [](R& r, Str k, int64_t v) {
        Check(TRITON_FN(TRITONSERVER_InferenceRequestSetIntParameter)(r.Mutable(), k.c_str(), v));
      })
      .def("set_bool_parameter", [](R& r, Str k, bool v) {
        Check(TRITON_FN(TRITONSERVER_InferenceRequestSetBoolParameter)(r.Mutable(), k.c_str(), v));
      })
      .def("set_double_parameter", [](R& r, Str k, double v) {
        Check(TRITON_FN(TRITONSERVER_InferenceRequestSetDoubleParameter)(r.Mutable(), k.c_str(),
                                                                         v));
      })
      .def("send", &Request::Send)
      .def("cancel", &Request::Cancel);
}

}  // namespace tritonpy
