#include "bindings/response_record.h"

#include <pybind11/stl.h>
#include <pybind11/typing.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <new>
#include <utility>

#include "bindings/errors.h"
#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {

OutputRecord::~OutputRecord() {
  if (buffer != nullptr) buffer->Unref();
}

OutputRecord::OutputRecord(OutputRecord&& other) noexcept
    : name(std::move(other.name)),
      datatype(other.datatype),
      shape(std::move(other.shape)),
      data_ptr(other.data_ptr),
      byte_size(other.byte_size),
      memory_type(other.memory_type),
      memory_type_id(other.memory_type_id),
      buffer(std::exchange(other.buffer, nullptr)) {}

namespace {

// `failed`: the response carries an error. An output whose buffer was never
// allocated (its allocator failed: a model may still send the response, with
// that error) has no data, and the core 2.51 hands back an uninitialized
// buffer_userp with it (InferenceResponse::Output never sets
// allocated_userp_ before a successful allocation). Only an output with data
// can have a buffer of ours: both our allocators give a userp exactly when
// they give memory.
void ReadOutput(const CoreApi& api, TRITONSERVER_InferenceResponse* r, uint32_t index,
                OutputRecord& o, bool failed) {
  const char* name = nullptr;
  TRITONSERVER_DataType dtype;
  const int64_t* shape = nullptr;
  uint64_t dims = 0;
  const void* base = nullptr;
  TRITONSERVER_MemoryType mtype;
  void* userp = nullptr;
  Check(api.TRITONSERVER_InferenceResponseOutput(r, index, &name, &dtype, &shape, &dims, &base,
                                                 &o.byte_size, &mtype, &o.memory_type_id, &userp));
  o.name = name;
  o.datatype = static_cast<int>(dtype);
  o.shape.assign(shape, shape + dims);
  o.data_ptr = reinterpret_cast<uintptr_t>(base);
  o.memory_type = static_cast<int>(mtype);
  if (base == nullptr) {
    if (o.byte_size > 0 && !failed) {
      throw Error(
          TRITONSERVER_ERROR_INTERNAL,
          "output '" + o.name + "' has " + std::to_string(o.byte_size) + " bytes but no buffer");
    }
    o.byte_size = 0;  // userp is not to be read
  } else if (userp != nullptr) {
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

// The labels of classes [0, count) of output `index`.
ClassLabels ReadLabels(TRITONSERVER_InferenceResponse* r, uint32_t index, size_t count) {
  ClassLabels labels;
  labels.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const char* label = nullptr;
    Check(TRITON_FN(TRITONSERVER_InferenceResponseOutputClassificationLabel)(r, index, i, &label));
    labels.push_back(label != nullptr ? std::optional<std::string>(label) : std::nullopt);
  }
  return labels;
}

// Classes are counted over one batch item, as Triton's classification
// extension does; the frontends refuse more than this many per item, so no
// more labels are read.
constexpr size_t kMaxClassesPerItem = 1'000'000;

// The labels of one batch item's classes of each output `request` names.
std::vector<std::pair<std::string, ClassLabels>> OutputLabels(
    TRITONSERVER_InferenceResponse* r, const std::vector<OutputRecord>& outputs,
    const LabelRequest& request) {
  std::vector<std::pair<std::string, ClassLabels>> labels;
  for (uint32_t i = 0; i < outputs.size(); ++i) {
    const OutputRecord& o = outputs[i];
    if (std::find(request.outputs.begin(), request.outputs.end(), o.name) ==
        request.outputs.end()) {
      continue;
    }
    size_t count = 1;  // saturates at kMaxClassesPerItem + 1, so never overflows
    const size_t first = request.batched && !o.shape.empty() ? 1 : 0;
    for (size_t d = first; d < o.shape.size(); ++d) {
      const int64_t dim = std::clamp<int64_t>(o.shape[d], 0, kMaxClassesPerItem + 1);
      count = std::min(count * static_cast<size_t>(dim), kMaxClassesPerItem + 1);
    }
    labels.emplace_back(o.name, ReadLabels(r, i, std::min(count, kMaxClassesPerItem)));
  }
  return labels;
}

}  // namespace

void ReadResponse(TRITONSERVER_InferenceResponse* r, uint32_t flags, const LabelRequest& labels,
                  std::unique_ptr<ResponseRecord>& into) {
  const CoreApi& api = Core();
  // Deleted on leaving, whatever happens: nothing below keeps it.
  struct Owner {
    TRITONSERVER_InferenceResponse* r;
    ~Owner() { ErrorPtr ignored(Core().TRITONSERVER_InferenceResponseDelete(r)); }
  } owner{r};
  if (!into) into = std::make_unique<ResponseRecord>();
  ResponseRecord& record = *into;
  record.flags = flags;
  const char* text = nullptr;
  Check(api.TRITONSERVER_InferenceResponseId(r, &text));
  record.request_id = text ? text : "";
  Check(api.TRITONSERVER_InferenceResponseModel(r, &text, &record.model_version));
  record.model_name = text ? text : "";
  if (TRITONSERVER_Error* err = api.TRITONSERVER_InferenceResponseError(r)) {
    // Owned by the response: not deleted here.
    record.error_code = static_cast<int>(api.TRITONSERVER_ErrorCode(err));
    const char* message = api.TRITONSERVER_ErrorMessage(err);
    record.error_message = message ? message : "";
  }
  uint32_t count = 0;
  Check(api.TRITONSERVER_InferenceResponseParameterCount(r, &count));
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    TRITONSERVER_ParameterType type;
    const void* value = nullptr;
    Check(api.TRITONSERVER_InferenceResponseParameter(r, i, &name, &type, &value));
    if (auto read = pyinterop::ReadParameter(type, value)) {
      record.parameters.emplace_back(name, std::move(*read));
    }
  }
  Check(api.TRITONSERVER_InferenceResponseOutputCount(r, &count));
  record.outputs.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    ReadOutput(api, r, i, record.outputs[i], record.error_code != 0);
  }
  if (labels.any() && !record.error_code) {
    const std::vector<OutputRecord>& outputs = record.outputs;
    if (labels.first_output && !outputs.empty()) {
      // Over the first output's last dimension.
      const std::vector<int64_t>& shape = outputs.front().shape;
      const int64_t classes = shape.empty() ? 0 : std::max<int64_t>(shape.back(), 0);
      record.class_labels = ReadLabels(r, 0, static_cast<size_t>(classes));
    }
    if (!labels.outputs.empty()) record.output_labels = OutputLabels(r, outputs, labels);
  }
}

std::unique_ptr<ResponseRecord> ErrorRecord(uint32_t flags, TRITONSERVER_Error_Code code,
                                            std::string message) {
  auto record = std::make_unique<ResponseRecord>();
  record->flags = flags;
  record->error_code = static_cast<int>(code);
  record->error_message = std::move(message);
  return record;
}

namespace {

// The struct sequence types, made once at import and kept for the process.
PyTypeObject* output_type = nullptr;
PyTypeObject* response_type = nullptr;

PyStructSequence_Field output_fields[] = {
    {"name", "the output's name"},
    {"datatype", "its DataType value"},
    {"shape", "its shape, a tuple of ints"},
    {"data_ptr", "the address of its data"},
    {"byte_size", "the size of its data in bytes"},
    {"memory_type", "the MemoryType value of its data"},
    {"memory_type_id", "the device id of its data"},
    {"memory", "the owner of its data (None when empty): keep it to keep the data"},
    {nullptr, nullptr}};
PyStructSequence_Desc output_desc = {"tritonserver._c.triton_bindings.Output",
                                     "One output tensor of a response, read from the core.",
                                     output_fields, 8};

PyStructSequence_Field response_fields[] = {
    {"final", "whether this is the request's last response"},
    {"error_code", "the ErrorCode value of the error it carries, or None"},
    {"error_message", "the error's message ('' without one)"},
    {"request_id", "the request's id"},
    {"model_name", "the model that answered"},
    {"model_version", "its version"},
    {"parameters", "the response's parameters, a dict"},
    {"outputs", "its outputs, a tuple of Output"},
    {"class_labels",
     "the labels of the first output's classes when classification was asked for, else None"},
    {"output_labels",
     "{output name: the labels (bytes, or None) of one batch item's classes} for the outputs "
     "set_label_outputs named, else None"},
    {nullptr, nullptr}};
PyStructSequence_Desc response_desc = {
    "tritonserver._c.triton_bindings.Response",
    "One response of a request (or its final flag alone), read from the core.", response_fields,
    10};

constexpr const char* kMemoryCapsule = "tritonserver.output_memory";

void ReleaseMemory(PyObject* capsule) {
  static_cast<OutputBuffer*>(PyCapsule_GetPointer(capsule, kMemoryCapsule))->Unref();
}

// Fills a struct sequence from `items` (new references, null on failure).
py::object Fill(PyTypeObject* type, std::initializer_list<PyObject*> items) {
  py::object out = py::reinterpret_steal<py::object>(PyStructSequence_New(type));
  Py_ssize_t i = 0;
  bool failed = !out;
  for (PyObject* item : items) {
    if (item == nullptr || failed) {
      failed = true;
      Py_XDECREF(item);
      continue;
    }
    PyStructSequence_SetItem(out.ptr(), i++, item);  // steals
  }
  if (failed) throw py::error_already_set();
  return out;
}

PyObject* Str(const std::string& s) {
  return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
}

py::object OutputToPython(OutputRecord& o) {
  py::tuple shape(o.shape.size());
  for (size_t i = 0; i < o.shape.size(); ++i) shape[i] = py::int_(o.shape[i]);
  py::object memory = py::none();
  if (o.buffer != nullptr) memory = OutputMemory(o);
  return Fill(output_type, {Str(o.name), PyLong_FromLong(o.datatype), shape.release().ptr(),
                            PyLong_FromSize_t(o.data_ptr), PyLong_FromSize_t(o.byte_size),
                            PyLong_FromLong(o.memory_type), PyLong_FromLongLong(o.memory_type_id),
                            memory.release().ptr()});
}

// {name: [bytes | None, ...]}: labels are the model's bytes, which need not be UTF-8.
py::object OutputLabelsToPython(
    const std::optional<std::vector<std::pair<std::string, ClassLabels>>>& all) {
  if (!all) return py::none();
  py::dict out;
  for (const auto& [name, labels] : *all) {
    py::list items(labels.size());
    for (size_t i = 0; i < labels.size(); ++i) {
      items[i] = labels[i] ? py::object(py::bytes(*labels[i])) : py::object(py::none());
    }
    out[py::reinterpret_steal<py::object>(Str(name))] = std::move(items);
  }
  return std::move(out);
}

}  // namespace

py::object OutputMemory(OutputRecord& o) {
  py::object memory = py::reinterpret_steal<py::object>(
      PyCapsule_New(static_cast<void*>(o.buffer), kMemoryCapsule, &ReleaseMemory));
  if (!memory) throw py::error_already_set();
  o.buffer = nullptr;  // the capsule's reference now
  return memory;
}

py::object RecordToPython(ResponseRecord& r) {
  py::tuple outputs(r.outputs.size());
  for (size_t i = 0; i < r.outputs.size(); ++i) outputs[i] = OutputToPython(r.outputs[i]);
  py::object labels = py::cast(r.class_labels);
  py::object output_labels = OutputLabelsToPython(r.output_labels);
  py::object error_code = r.error_code ? py::object(py::int_(*r.error_code)) : py::none();
  return Fill(response_type,
              {PyBool_FromLong(r.final()), error_code.release().ptr(), Str(r.error_message),
               Str(r.request_id), Str(r.model_name), PyLong_FromLongLong(r.model_version),
               pyinterop::ParametersToPython(r.parameters).release().ptr(), outputs.release().ptr(),
               labels.release().ptr(), output_labels.release().ptr()});
}

void RegisterResponseRecord(py::module_& m) {
  output_type = PyStructSequence_NewType(&output_desc);
  response_type = PyStructSequence_NewType(&response_desc);
  if (output_type == nullptr || response_type == nullptr) throw py::error_already_set();
  m.add_object("Output", py::handle(reinterpret_cast<PyObject*>(output_type)));
  m.add_object("Response", py::handle(reinterpret_cast<PyObject*>(response_type)));
}

}  // namespace tritonpy
