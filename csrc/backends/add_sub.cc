// add_sub: OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 - INPUT1,
// elementwise, for FP32 or INT32 inputs of one datatype and one shape.
#include <cstdint>
#include <string>
#include <vector>

#include "backend_util.h"

namespace tritonserver::backends {
namespace {

// Integer results wrap around on overflow (as numpy's do) instead of being
// undefined behaviour.
template <typename T>
struct Arithmetic {
  using type = T;
};
template <>
struct Arithmetic<int32_t> {
  using type = uint32_t;
};

template <typename T>
void AddSub(RequestContext& ctx, const InputTensor& a, const InputTensor& b) {
  using W = typename Arithmetic<T>::type;
  const std::vector<T> x = a.Values<T>();
  const std::vector<T> y = b.Values<T>();
  ctx.MarkComputeStart();
  std::vector<T> sum(x.size());
  std::vector<T> difference(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    sum[i] = static_cast<T>(static_cast<W>(x[i]) + static_cast<W>(y[i]));
    difference[i] = static_cast<T>(static_cast<W>(x[i]) - static_cast<W>(y[i]));
  }
  ctx.MarkComputeEnd();
  ResponsePtr response = ctx.NewResponse();
  for (const std::string& output : ctx.RequestedOutputs()) {
    const std::vector<T>* result = output == "OUTPUT0"   ? &sum
                                   : output == "OUTPUT1" ? &difference
                                                         : nullptr;
    if (result == nullptr) {
      throw BackendError(
          TRITONSERVER_ERROR_INVALID_ARG,
          "add_sub: unknown output '" + output +
              "'; it has OUTPUT0 (sum) and OUTPUT1 (difference)");
    }
    WriteOutput(response.get(), output, a.dtype(), a.shape(), result->data(),
                result->size() * sizeof(T));
  }
  ctx.Send(std::move(response), /*final=*/true);
}

}  // namespace

void ValidateModel(const ModelState&) {}

void ExecuteRequest(RequestContext& ctx) {
  const InputTensor a = ctx.Input("INPUT0");
  const InputTensor b = ctx.Input("INPUT1");
  if (a.dtype() != b.dtype()) {
    throw BackendError(TRITONSERVER_ERROR_INVALID_ARG,
                       std::string("add_sub: INPUT0 is ") +
                           TRITONSERVER_DataTypeString(a.dtype()) +
                           " but INPUT1 is " +
                           TRITONSERVER_DataTypeString(b.dtype()) +
                           "; both inputs must have the same datatype");
  }
  if (a.shape() != b.shape()) {
    throw BackendError(TRITONSERVER_ERROR_INVALID_ARG,
                       "add_sub: INPUT0 has shape " + ShapeString(a.shape()) +
                           " but INPUT1 has shape " + ShapeString(b.shape()) +
                           "; both inputs must have the same shape");
  }
  switch (a.dtype()) {
    case TRITONSERVER_TYPE_FP32:
      return AddSub<float>(ctx, a, b);
    case TRITONSERVER_TYPE_INT32:
      return AddSub<int32_t>(ctx, a, b);
    default:
      throw BackendError(
          TRITONSERVER_ERROR_INVALID_ARG,
          std::string("add_sub: inputs must be FP32 or INT32, not ") +
              TRITONSERVER_DataTypeString(a.dtype()));
  }
}

}  // namespace tritonserver::backends
