// Every C enum the Python API exposes, as one table each. The public Python
// enums are built from these tables (tritonserver/_enums.py), so each value
// is written once, here, next to the C name it comes from.
#include <pybind11/pybind11.h>

#include <utility>
#include <vector>

#include "triton/tritonserver.h"

namespace py = pybind11;

namespace tritonpy {
namespace {

using Table = std::vector<std::pair<const char*, int>>;

const std::vector<std::pair<const char*, Table>>& Tables() {
  static const auto* tables = new std::vector<std::pair<const char*, Table>>{
      {"DataType",
       {{"INVALID", TRITONSERVER_TYPE_INVALID},
        {"BOOL", TRITONSERVER_TYPE_BOOL},
        {"UINT8", TRITONSERVER_TYPE_UINT8},
        {"UINT16", TRITONSERVER_TYPE_UINT16},
        {"UINT32", TRITONSERVER_TYPE_UINT32},
        {"UINT64", TRITONSERVER_TYPE_UINT64},
        {"INT8", TRITONSERVER_TYPE_INT8},
        {"INT16", TRITONSERVER_TYPE_INT16},
        {"INT32", TRITONSERVER_TYPE_INT32},
        {"INT64", TRITONSERVER_TYPE_INT64},
        {"FP16", TRITONSERVER_TYPE_FP16},
        {"FP32", TRITONSERVER_TYPE_FP32},
        {"FP64", TRITONSERVER_TYPE_FP64},
        {"BYTES", TRITONSERVER_TYPE_BYTES},
        {"BF16", TRITONSERVER_TYPE_BF16}}},
      {"MemoryType",
       {{"CPU", TRITONSERVER_MEMORY_CPU},
        {"CPU_PINNED", TRITONSERVER_MEMORY_CPU_PINNED},
        {"GPU", TRITONSERVER_MEMORY_GPU}}},
      {"ParameterType",
       {{"STRING", TRITONSERVER_PARAMETER_STRING},
        {"INT", TRITONSERVER_PARAMETER_INT},
        {"BOOL", TRITONSERVER_PARAMETER_BOOL},
        {"DOUBLE", TRITONSERVER_PARAMETER_DOUBLE},
        {"BYTES", TRITONSERVER_PARAMETER_BYTES}}},
      {"InstanceGroupKind",
       {{"AUTO", TRITONSERVER_INSTANCEGROUPKIND_AUTO},
        {"CPU", TRITONSERVER_INSTANCEGROUPKIND_CPU},
        {"GPU", TRITONSERVER_INSTANCEGROUPKIND_GPU},
        {"MODEL", TRITONSERVER_INSTANCEGROUPKIND_MODEL}}},
      {"LogLevel",
       {{"INFO", TRITONSERVER_LOG_INFO},
        {"WARN", TRITONSERVER_LOG_WARN},
        {"ERROR", TRITONSERVER_LOG_ERROR},
        {"VERBOSE", TRITONSERVER_LOG_VERBOSE}}},
      {"LogFormat", {{"DEFAULT", TRITONSERVER_LOG_DEFAULT}, {"ISO8601", TRITONSERVER_LOG_ISO8601}}},
      {"ErrorCode",
       {{"UNKNOWN", TRITONSERVER_ERROR_UNKNOWN},
        {"INTERNAL", TRITONSERVER_ERROR_INTERNAL},
        {"NOT_FOUND", TRITONSERVER_ERROR_NOT_FOUND},
        {"INVALID_ARG", TRITONSERVER_ERROR_INVALID_ARG},
        {"UNAVAILABLE", TRITONSERVER_ERROR_UNAVAILABLE},
        {"UNSUPPORTED", TRITONSERVER_ERROR_UNSUPPORTED},
        {"ALREADY_EXISTS", TRITONSERVER_ERROR_ALREADY_EXISTS},
        {"CANCELLED", TRITONSERVER_ERROR_CANCELLED}}},
      {"MetricFormat", {{"PROMETHEUS", TRITONSERVER_METRIC_PROMETHEUS}}},
      {"MetricKind",
       {{"COUNTER", TRITONSERVER_METRIC_KIND_COUNTER},
        {"GAUGE", TRITONSERVER_METRIC_KIND_GAUGE},
        {"HISTOGRAM", TRITONSERVER_METRIC_KIND_HISTOGRAM}}},
      {"RequestFlag",
       {{"SEQUENCE_START", TRITONSERVER_REQUEST_FLAG_SEQUENCE_START},
        {"SEQUENCE_END", TRITONSERVER_REQUEST_FLAG_SEQUENCE_END}}},
      {"RequestReleaseFlag",
       {{"ALL", TRITONSERVER_REQUEST_RELEASE_ALL},
        {"RESCHEDULE", TRITONSERVER_REQUEST_RELEASE_RESCHEDULE}}},
      {"ResponseCompleteFlag", {{"FINAL", TRITONSERVER_RESPONSE_COMPLETE_FINAL}}},
      {"ModelBatchFlag",
       {{"UNKNOWN", TRITONSERVER_BATCH_UNKNOWN}, {"FIRST_DIM", TRITONSERVER_BATCH_FIRST_DIM}}},
      {"ModelIndexFlag", {{"READY", TRITONSERVER_INDEX_FLAG_READY}}},
      {"ModelTxnPropertyFlag",
       {{"ONE_TO_ONE", TRITONSERVER_TXN_ONE_TO_ONE}, {"DECOUPLED", TRITONSERVER_TXN_DECOUPLED}}},
      {"ModelControlMode",
       {{"NONE", TRITONSERVER_MODEL_CONTROL_NONE},
        {"POLL", TRITONSERVER_MODEL_CONTROL_POLL},
        {"EXPLICIT", TRITONSERVER_MODEL_CONTROL_EXPLICIT}}},
      {"RateLimitMode",
       {{"OFF", TRITONSERVER_RATE_LIMIT_OFF}, {"EXEC_COUNT", TRITONSERVER_RATE_LIMIT_EXEC_COUNT}}},
      {"InferenceTraceLevel",
       {{"DISABLED", TRITONSERVER_TRACE_LEVEL_DISABLED},
        {"MIN", TRITONSERVER_TRACE_LEVEL_MIN},
        {"MAX", TRITONSERVER_TRACE_LEVEL_MAX},
        {"TIMESTAMPS", TRITONSERVER_TRACE_LEVEL_TIMESTAMPS},
        {"TENSORS", TRITONSERVER_TRACE_LEVEL_TENSORS}}},
      {"InferenceTraceActivity",
       {{"REQUEST_START", TRITONSERVER_TRACE_REQUEST_START},
        {"QUEUE_START", TRITONSERVER_TRACE_QUEUE_START},
        {"COMPUTE_START", TRITONSERVER_TRACE_COMPUTE_START},
        {"COMPUTE_INPUT_END", TRITONSERVER_TRACE_COMPUTE_INPUT_END},
        {"COMPUTE_OUTPUT_START", TRITONSERVER_TRACE_COMPUTE_OUTPUT_START},
        {"COMPUTE_END", TRITONSERVER_TRACE_COMPUTE_END},
        {"REQUEST_END", TRITONSERVER_TRACE_REQUEST_END},
        {"TENSOR_QUEUE_INPUT", TRITONSERVER_TRACE_TENSOR_QUEUE_INPUT},
        {"TENSOR_BACKEND_INPUT", TRITONSERVER_TRACE_TENSOR_BACKEND_INPUT},
        {"TENSOR_BACKEND_OUTPUT", TRITONSERVER_TRACE_TENSOR_BACKEND_OUTPUT},
        {"CUSTOM_ACTIVITY", TRITONSERVER_TRACE_CUSTOM_ACTIVITY}}},
  };
  return *tables;
}

py::dict EnumTables() {
  py::dict out;
  for (const auto& [enum_name, table] : Tables()) {
    py::dict values;
    for (const auto& [name, value] : table) values[name] = value;
    out[enum_name] = values;
  }
  return out;
}

}  // namespace

void RegisterEnums(py::module_& m) {
  m.def("enum_tables", &EnumTables, "Every exposed C enum as {enum: {member: value}}.");
}

}  // namespace tritonpy
