// RequestHandle and Input (see handle.h).
#include "handle.h"

#include <algorithm>

#include <pybind11/stl.h>

#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "pyinterop/gil.h"
#include "pyinterop/parameters.h"

namespace inprocess {
namespace {

// One input tensor of a request: a typed record whose data is read through
// the buffer protocol.
class Input {
 public:
  Input(py::object handle, const tb::InputTensor& tensor)
      : handle_(std::move(handle)),
        name_(tensor.name()),
        datatype_(static_cast<int>(tensor.dtype())),
        byte_size_(tensor.byte_size()) {
    const std::vector<int64_t>& dims = tensor.shape();
    shape_ = py::tuple(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) shape_[i] = py::int_(dims[i]);
    const std::vector<tb::Buffer>& buffers = tensor.buffers();
    if (buffers.size() == 1) {
      data_ = buffers[0].data;
      memory_type_ = buffers[0].memory_type;
      memory_type_id_ = buffers[0].memory_type_id;
    } else if (buffers.size() > 1) {  // gathered into one host copy (from devices too)
      gathered_.reset(new char[byte_size_]);
      tensor.CopyTo(gathered_.get());
      data_ = gathered_.get();
    }
  }

  const std::string& name() const { return name_; }
  int datatype() const { return datatype_; }
  const py::tuple& shape() const { return shape_; }
  int memory_type() const { return memory_type_; }
  int64_t memory_type_id() const { return memory_type_id_; }
  uintptr_t data_ptr() const { return reinterpret_cast<uintptr_t>(data_); }
  uint64_t byte_size() const { return byte_size_; }

  py::buffer_info Buffer() const {
    if (!tb::IsHostMemory(static_cast<TRITONSERVER_MemoryType>(memory_type_))) {
      throw py::buffer_error("this input is in device memory: read it through DLPack");
    }
    static char empty = 0;
    void* data = const_cast<void*>(data_ != nullptr ? data_ : &empty);
    return py::buffer_info(data, 1, py::format_descriptor<uint8_t>::format(),
                           static_cast<py::ssize_t>(byte_size_),
                           /*readonly=*/true);
  }

 private:
  py::object handle_;  // the RequestHandle whose request holds the data
  std::string name_;
  int datatype_;
  py::tuple shape_;
  int memory_type_ = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id_ = 0;
  const void* data_ = nullptr;
  uint64_t byte_size_;
  std::unique_ptr<char[]> gathered_;
};

// A Python buffer held while the core copies from it; released with the GIL.
struct HeldBuffer {
  Py_buffer view{};
  bool held = false;
  HeldBuffer() = default;
  HeldBuffer(const HeldBuffer&) = delete;
  HeldBuffer& operator=(const HeldBuffer&) = delete;
  ~HeldBuffer() {
    if (held) PyBuffer_Release(&view);
  }
};

// What send() gets for one output (a tritonserver._inprocess._response.Output).
struct OutputItem {
  std::string name;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  HeldBuffer data;
};

void ParseOutput(py::handle item, OutputItem& out) {
  // Output is a NamedTuple (name, datatype, shape, data), checked at load.
  if (!PyTuple_Check(item.ptr()) || PyTuple_GET_SIZE(item.ptr()) != 4) {
    throw tb::Error::InvalidArgument("each output must be an Output(name, datatype, shape, data)");
  }
  py::tuple fields = py::reinterpret_borrow<py::tuple>(item);
  try {
    out.name = fields[0].cast<std::string>();
    out.dtype = static_cast<TRITONSERVER_DataType>(fields[1].cast<int>());
    out.shape = fields[2].cast<std::vector<int64_t>>();
  } catch (const py::cast_error&) {
    throw tb::Error::InvalidArgument(
        "each output must be an Output(name: str, datatype: int, shape: "
        "ints, data)");
  }
  if (PyObject_GetBuffer(fields[3].ptr(), &out.data.view, PyBUF_C_CONTIGUOUS) != 0) {
    PyErr_Clear();
    throw tb::Error::InvalidArgument("output '" + out.name +
                                     "': the data is not a contiguous buffer");
  }
  out.data.held = true;
  const uint64_t element = tb::ElementByteSize(out.dtype);
  if (element != 0 &&
      tb::ElementCount(out.shape) * element != static_cast<uint64_t>(out.data.view.len)) {
    throw tb::Error::InvalidArgument("output '" + out.name +
                                     "': " + std::to_string(out.data.view.len) +
                                     " bytes do not fill shape " + tb::ShapeString(out.shape));
  }
}

void SetParameter(tb::Response& response, const std::string& name,
                  const pyinterop::ParameterValue& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          response.SetBoolParameter(name, v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          response.SetIntParameter(name, v);
        } else if constexpr (std::is_same_v<T, double>) {
          response.SetDoubleParameter(name, v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          response.SetStringParameter(name, v);
        } else {
          throw tb::Error::InvalidArgument("response parameter '" + name + "' cannot be bytes");
        }
      },
      value);
}

}  // namespace

RequestHandle::~RequestHandle() {
  if (owned_ == nullptr) return;  // the SDK's: released after Execute
  auto release = [this] {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!owned_->finished()) {
      owned_->Fail(TRITONSERVER_ERROR_INTERNAL,
                   owned_->model().decoupled() ? "the model dropped the request's response sender "
                                                 "without sending the final flag"
                                               : "the model sent no response for this request");
    }
    owned_.reset();  // releases the request
  };
  if (pyinterop::PythonAlive() && PyGILState_Check()) {
    py::gil_scoped_release unlocked;  // the release may run callbacks
    release();
  } else {
    release();
  }
}

void RequestHandle::FailIfOpen(TRITONSERVER_Error_Code code, const std::string& message) {
  py::gil_scoped_release unlocked;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!request_->finished()) request_->Fail(code, message.c_str());
}

void RequestHandle::Send(py::handle outputs, py::handle parameters, bool final) {
  if (!PyList_Check(outputs.ptr()) && !PyTuple_Check(outputs.ptr())) {
    throw tb::Error::InvalidArgument("outputs must be a list of Output");
  }
  py::sequence items = py::reinterpret_borrow<py::sequence>(outputs);
  std::vector<OutputItem> parsed(items.size());
  for (size_t i = 0; i < parsed.size(); ++i) ParseOutput(items[i], parsed[i]);
  const pyinterop::Parameters params =
      pyinterop::ParametersFromPython(parameters, pyinterop::ParameterUse::kRequest);
  {
    py::gil_scoped_release unlocked;  // the copies, and the send's callbacks
    std::lock_guard<std::mutex> lock(mutex_);
    tb::Response response = request_->NewResponse();
    // Only what the request asked for (the core lists every output when
    // it named none), as the python backend prunes a model's outputs.
    const std::vector<std::string> requested = request_->RequestedOutputs();
    for (const OutputItem& out : parsed) {
      if (std::find(requested.begin(), requested.end(), out.name) == requested.end()) continue;
      const auto size = static_cast<uint64_t>(out.data.view.len);
      tb::OutputTensor tensor = response.AddOutput(out.name, out.dtype, out.shape, size);
      if (size != 0) std::memcpy(tensor.data(), out.data.view.buf, size);
    }
    for (const auto& [name, value] : params) {
      SetParameter(response, name, value);
    }
    response.Send(final);
  }
}

void RequestHandle::UpdateStates(py::handle states) {
  if (!PyList_Check(states.ptr()) && !PyTuple_Check(states.ptr())) {
    throw tb::Error::InvalidArgument("states must be a list of Output");
  }
  py::sequence items = py::reinterpret_borrow<py::sequence>(states);
  std::vector<OutputItem> parsed(items.size());
  for (size_t i = 0; i < parsed.size(); ++i) ParseOutput(items[i], parsed[i]);
  py::gil_scoped_release unlocked;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const OutputItem& item : parsed) {
    TRITONBACKEND_State* state = nullptr;
    tb::Check(TRITONBACKEND_StateNew(&state, request_->handle(),
                                     tb::CString(item.name, "state name"), item.dtype,
                                     item.shape.data(), static_cast<uint32_t>(item.shape.size())));
    const auto size = static_cast<uint64_t>(item.data.view.len);
    void* buffer = nullptr;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    int64_t memory_type_id = 0;
    tb::Check(TRITONBACKEND_StateBuffer(state, &buffer, size, &memory_type, &memory_type_id));
    if (!tb::IsHostMemory(memory_type)) {
      throw tb::Error::Unsupported("state '" + item.name + "': the core gave a device buffer");
    }
    if (size != 0) std::memcpy(buffer, item.data.view.buf, size);
    tb::Check(TRITONBACKEND_StateUpdate(state));
  }
}

void RequestHandle::Fail(int code, const std::string& message) {
  FailIfOpen(static_cast<TRITONSERVER_Error_Code>(code), message);
}

void RequestHandle::SendError(int code, const std::string& message) {
  py::gil_scoped_release unlocked;
  std::lock_guard<std::mutex> lock(mutex_);
  request_->NewResponse().SendError(static_cast<TRITONSERVER_Error_Code>(code), message,
                                    /*final=*/false);
}

void RequestHandle::SetRescheduled(bool reschedule) {
  py::gil_scoped_release unlocked;
  std::lock_guard<std::mutex> lock(mutex_);
  request_->SetRescheduled(reschedule);
}

bool RequestHandle::rescheduled() {
  py::gil_scoped_release unlocked;
  std::lock_guard<std::mutex> lock(mutex_);
  return request_->rescheduled();
}

void RequestHandle::Finish() {
  py::gil_scoped_release unlocked;
  std::lock_guard<std::mutex> lock(mutex_);
  request_->Finish();
}

bool RequestHandle::IsCancelled() {
  py::gil_scoped_release unlocked;
  std::lock_guard<std::mutex> lock(mutex_);
  return !request_->finished() && request_->IsCancelled();
}

bool RequestHandle::finished() { return request_->finished(); }

std::string RequestHandle::Id() { return request_->id(); }

py::object RequestHandle::CorrelationId() {
  const tb::CorrelationId id = request_->correlation_id();
  if (id.is_string) return py::str(id.text);
  return py::int_(id.number);
}

uint32_t RequestHandle::Flags() { return request_->flags(); }

uint64_t RequestHandle::TimeoutUs() { return request_->timeout_us(); }

py::tuple RequestHandle::RequestedOutputs() {
  const std::vector<std::string> names = request_->RequestedOutputs();
  py::tuple out(names.size());
  for (size_t i = 0; i < names.size(); ++i) out[i] = py::str(names[i]);
  return out;
}

py::dict RequestHandle::Parameters() {
  TRITONBACKEND_Request* raw = request_->handle();
  uint32_t count = 0;
  tb::Check(TRITONBACKEND_RequestParameterCount(raw, &count));
  pyinterop::Parameters params;
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
    const void* value = nullptr;
    tb::Check(TRITONBACKEND_RequestParameter(raw, i, &name, &type, &value));
    if (auto read = pyinterop::ReadParameter(type, value)) {
      params.emplace_back(name, std::move(*read));
    }
  }
  return pyinterop::ParametersToPython(params);
}

py::object RequestHandle::TraceContext() {
  TRITONSERVER_InferenceTrace* trace = nullptr;
  tb::Check(TRITONBACKEND_RequestTrace(request_->handle(), &trace));
  const char* context = nullptr;
  if (trace != nullptr) tb::Check(TRITONSERVER_InferenceTraceContext(trace, &context));
  if (context == nullptr || context[0] == '\0') return py::none();
  return py::str(context);
}

py::tuple Inputs(py::object handle) {
  const tb::Request& request = handle.cast<RequestHandle&>().request();
  uint32_t count = 0;
  tb::Check(TRITONBACKEND_RequestInputCount(request.handle(), &count));
  py::tuple out(count);
  for (uint32_t i = 0; i < count; ++i) {
    out[i] = py::cast(std::make_unique<Input>(handle, request.Input(i)));
  }
  return out;
}

void RegisterHandleTypes(py::module_& module) {
  py::class_<RequestHandle>(module, "RequestHandle", py::module_local(),
                            "One request of a batch, as the inprocess "
                            "backend hands it to Python.")
      .def("send", &RequestHandle::Send, py::arg("outputs"), py::arg("parameters") = py::none(),
           py::arg("final") = true, "One response: a list of Output, a dict of parameters or None.")
      .def("update_states", &RequestHandle::UpdateStates, py::arg("states"),
           "The sequence's implicit states, a list of Output named as the states' "
           "output_name; read by the next request of the sequence.")
      .def("fail", &RequestHandle::Fail, py::arg("code"), py::arg("message"),
           "End the request with an error (nothing if it already ended).")
      .def("send_error", &RequestHandle::SendError, py::arg("code"), py::arg("message"),
           "A non-final error response of a decoupled request; more may follow.")
      .def("finish", &RequestHandle::Finish,
           "The final flag of a decoupled request, without a response.")
      .def("is_cancelled", &RequestHandle::IsCancelled)
      .def("set_rescheduled", &RequestHandle::SetRescheduled, py::arg("reschedule"),
           "Give the request back to its scheduler (unanswered) once the model is done "
           "with it.")
      .def("defer", &RequestHandle::Defer,
           "Python answers the request after execute returned (keep the handle).")
      .def("hold", &RequestHandle::Hold,
           "A response sender answers the request, maybe after execute returned (a model "
           "that is not decoupled may use one).")
      .def("inputs", &Inputs, "The inputs, as a tuple of Input.")
      .def("id", &RequestHandle::Id)
      .def("correlation_id", &RequestHandle::CorrelationId)
      .def("flags", &RequestHandle::Flags)
      .def("timeout_us", &RequestHandle::TimeoutUs)
      .def("requested_outputs", &RequestHandle::RequestedOutputs)
      .def("parameters", &RequestHandle::Parameters)
      .def("trace_context", &RequestHandle::TraceContext,
           "The request's trace context (JSON text), or None when it is not traced.")
      .def_property_readonly("finished", &RequestHandle::finished)
      .def_property_readonly("rescheduled", &RequestHandle::rescheduled)
      .def_property_readonly("held", &RequestHandle::held);
  py::class_<Input>(module, "Input", py::buffer_protocol(), py::module_local(),
                    "An input tensor of a request; its data (read only) "
                    "through the buffer protocol.")
      .def_property_readonly("name", &Input::name)
      .def_property_readonly("datatype", &Input::datatype)
      .def_property_readonly("shape", &Input::shape)
      .def_property_readonly("memory_type", &Input::memory_type)
      .def_property_readonly("memory_type_id", &Input::memory_type_id)
      .def_property_readonly("data_ptr", &Input::data_ptr)
      .def_property_readonly("byte_size", &Input::byte_size)
      .def_buffer(&Input::Buffer);
}

}  // namespace inprocess
