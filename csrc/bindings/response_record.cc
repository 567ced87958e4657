#include "bindings/response_record.h"

#include <pybind11/stl.h>
#include <pybind11/typing.h>

#include <cstring>
#include <new>

#include "bindings/errors.h"
#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {

OutputRecord::~OutputRecord() {
  if (buffer != nullptr) buffer->Unref();
}

namespace {

void ReadOutput(const CoreApi& api, TRITONSERVER_InferenceResponse* r,
                uint32_t index, OutputRecord& o) {
  const char* name = nullptr;
  TRITONSERVER_DataType dtype;
  const int64_t* shape = nullptr;
  uint64_t dims = 0;
  const void* base = nullptr;
  TRITONSERVER_MemoryType mtype;
  void* userp = nullptr;
  Check(api.TRITONSERVER_InferenceResponseOutput(r, index, &name, &dtype, &shape, &dims,
                                                 &base, &o.byte_size, &mtype,
                                                 &o.memory_type_id, &userp));
  o.name = name;
  o.datatype = static_cast<int>(dtype);
  o.shape.assign(shape, shape + dims);
  o.data_ptr = reinterpret_cast<uintptr_t>(base);
  o.memory_type = static_cast<int>(mtype);
  if (userp != nullptr) {
    o.buffer = static_cast<OutputBuffer*>(userp);  // one of our allocators'
    o.buffer->Ref();
  } else if (o.byte_size > 0) {
    // Not from our allocator: the memory dies with the response, so copy.
    if (mtype == TRITONSERVER_MEMORY_GPU) {
      throw Error(TRITONSERVER_ERROR_UNSUPPORTED,
                  "output '" + o.name + "' is in GPU memory the core owns");
    }
    HostBuffer* copy = HostBuffer::New(o.byte_size);
    if (copy == nullptr) throw std::bad_alloc();
    std::memcpy(copy->data(), base, o.byte_size);
    o.buffer = copy;
    o.data_ptr = reinterpret_cast<uintptr_t>(copy->data());
    o.memory_type = TRITONSERVER_MEMORY_CPU;
    o.memory_type_id = 0;
  }
}

// The labels of the first output's classes (its last dimension).
std::vector<std::optional<std::string>> ClassLabels(
    const CoreApi& api, TRITONSERVER_InferenceResponse* r, const OutputRecord& first) {
  std::vector<std::optional<std::string>> labels;
  if (first.shape.empty() || first.shape.back() <= 0) return labels;
  const auto classes = static_cast<size_t>(first.shape.back());
  labels.reserve(classes);
  for (size_t i = 0; i < classes; ++i) {
    const char* label = nullptr;
    Check(TRITON_FN(TRITONSERVER_InferenceResponseOutputClassificationLabel)(r, 0, i,
                                                                            &label));
    labels.push_back(label != nullptr ? std::optional<std::string>(label) : std::nullopt);
  }
  return labels;
}

}  // namespace

std::unique_ptr<ResponseRecord> ReadResponse(TRITONSERVER_InferenceResponse* r,
                                             uint32_t flags, bool classify) {
  const CoreApi& api = Core();
  // Deleted on leaving, whatever happens: nothing below keeps it.
  struct Owner {
    TRITONSERVER_InferenceResponse* r;
    ~Owner() { ErrorPtr ignored(Core().TRITONSERVER_InferenceResponseDelete(r)); }
  } owner{r};
  auto record = std::make_unique<ResponseRecord>();
  record->flags = flags;
  const char* text = nullptr;
  Check(api.TRITONSERVER_InferenceResponseId(r, &text));
  record->request_id = text ? text : "";
  Check(api.TRITONSERVER_InferenceResponseModel(r, &text, &record->model_version));
  record->model_name = text ? text : "";
  if (TRITONSERVER_Error* err = api.TRITONSERVER_InferenceResponseError(r)) {
    // Owned by the response: not deleted here.
    record->error_code = static_cast<int>(api.TRITONSERVER_ErrorCode(err));
    const char* message = api.TRITONSERVER_ErrorMessage(err);
    record->error_message = message ? message : "";
  }
  uint32_t count = 0;
  Check(api.TRITONSERVER_InferenceResponseParameterCount(r, &count));
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    TRITONSERVER_ParameterType type;
    const void* value = nullptr;
    Check(api.TRITONSERVER_InferenceResponseParameter(r, i, &name, &type, &value));
    if (auto read = pyinterop::ReadParameter(type, value)) {
      record->parameters.emplace_back(name, std::move(*read));
    }
  }
  Check(api.TRITONSERVER_InferenceResponseOutputCount(r, &count));
  record->outputs.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    record->outputs.push_back(std::make_shared<OutputRecord>());
    ReadOutput(api, r, i, *record->outputs.back());
  }
  if (classify && !record->error_code && !record->outputs.empty()) {
    record->class_labels = ClassLabels(api, r, *record->outputs.front());
  }
  return record;
}

std::unique_ptr<ResponseRecord> ErrorRecord(uint32_t flags, TRITONSERVER_Error_Code code,
                                            std::string message) {
  auto record = std::make_unique<ResponseRecord>();
  record->flags = flags;
  record->error_code = static_cast<int>(code);
  record->error_message = std::move(message);
  return record;
}

void RegisterResponseRecord(py::module_& m) {
  using O = OutputRecord;
  py::class_<O, std::shared_ptr<O>>(
      m, "Output", "One output tensor of a response; owns its memory.")
      .def_property_readonly("name", [](const O& o) { return o.name; })
      .def_property_readonly("datatype", [](const O& o) { return o.datatype; })
      .def_property_readonly("shape",
                             [](const O& o) -> py::typing::Tuple<py::int_, py::ellipsis> {
                               py::tuple shape(o.shape.size());
                               for (size_t i = 0; i < o.shape.size(); ++i) {
                                 shape[i] = py::int_(o.shape[i]);
                               }
                               return shape;
                             })
      .def_property_readonly("data_ptr", [](const O& o) { return o.data_ptr; })
      .def_property_readonly("byte_size", [](const O& o) { return o.byte_size; })
      .def_property_readonly("memory_type", [](const O& o) { return o.memory_type; })
      .def_property_readonly("memory_type_id", [](const O& o) { return o.memory_type_id; });
  using R = ResponseRecord;
  py::class_<R>(m, "Response",
                "One response of a request (or its final flag alone), read from the core.")
      .def_property_readonly("final", &R::final)
      .def_property_readonly("error_code", [](const R& r) { return r.error_code; })
      .def_property_readonly("error_message", [](const R& r) { return r.error_message; })
      .def_property_readonly("request_id", [](const R& r) { return r.request_id; })
      .def_property_readonly("model_name", [](const R& r) { return r.model_name; })
      .def_property_readonly("model_version", [](const R& r) { return r.model_version; })
      .def_property_readonly("parameters",
                             [](const R& r) -> pyinterop::PyParameters {
                               return pyinterop::ParametersToPython(r.parameters);
                             })
      .def_property_readonly("outputs", [](const R& r) { return r.outputs; })
      .def_property_readonly("class_labels", [](const R& r) { return r.class_labels; });
}

}  // namespace tritonpy
