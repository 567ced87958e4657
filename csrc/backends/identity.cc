// identity: every requested output OUTPUT<i> is a copy of input INPUT<i>, with
// the same datatype (BYTES included) and shape.
#include <string>

#include "backend_util.h"

namespace tritonserver::backends {

void ValidateModel(const ModelState&) {}

void ExecuteRequest(RequestContext& ctx) {
  ResponsePtr response = ctx.NewResponse();
  ctx.MarkComputeStart();
  for (const std::string& output : ctx.RequestedOutputs()) {
    if (output.rfind("OUTPUT", 0) != 0) {
      throw BackendError(TRITONSERVER_ERROR_INVALID_ARG,
                         "identity: output '" + output +
                             "' is not named OUTPUT<i>, so it has no INPUT<i>");
    }
    const InputTensor input = ctx.Input(("INPUT" + output.substr(6)).c_str());
    input.CopyTo(AddOutput(response.get(), output, input.dtype(), input.shape(),
                           input.byte_size()));
  }
  ctx.MarkComputeEnd();
  ctx.Send(std::move(response), /*final=*/true);
}

}  // namespace tritonserver::backends
