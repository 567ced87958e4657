// repeat (decoupled): for an INT32 input IN of N values, sends N responses,
// each with one value in OUT (shape [1]), in order, then the final flag.
#include <cstdint>
#include <string>
#include <vector>

#include "backend_util.h"

namespace tritonserver::backends {

void ValidateModel(const ModelState& model) {
  if (!model.decoupled) {
    throw BackendError(TRITONSERVER_ERROR_INVALID_ARG,
                       "model '" + model.name +
                           "': the repeat backend sends several responses per "
                           "request and needs model_transaction_policy "
                           "{ decoupled: true }");
  }
}

void ExecuteRequest(RequestContext& ctx) {
  const InputTensor input = ctx.Input("IN");
  if (input.dtype() != TRITONSERVER_TYPE_INT32) {
    throw BackendError(TRITONSERVER_ERROR_INVALID_ARG,
                       std::string("repeat: input 'IN' must be INT32, not ") +
                           TRITONSERVER_DataTypeString(input.dtype()));
  }
  ctx.MarkComputeStart();
  const std::vector<int32_t> values = input.Values<int32_t>();
  ctx.MarkComputeEnd();
  for (const int32_t value : values) {
    if (ctx.IsCancelled()) {
      throw BackendError(TRITONSERVER_ERROR_CANCELLED, "request was cancelled");
    }
    ResponsePtr response = ctx.NewResponse();
    WriteOutput(response.get(), "OUT", TRITONSERVER_TYPE_INT32, {1}, &value,
                sizeof(value));
    ctx.Send(std::move(response), /*final=*/false);
  }
  ctx.SendFinal();
}

}  // namespace tritonserver::backends
