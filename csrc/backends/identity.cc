// identity: each requested output OUTPUT<i> is a copy of input INPUT<i>, with
// the same datatype (BYTES included) and shape.
#include <tritonserver/backend.h>

namespace tb = tritonserver::backend;

class Identity : public tb::Backend {
 public:
  void Execute(tb::Instance&, tb::Requests& requests) override {
    requests.ForEach([](tb::Request& request) {
      tb::Response response = request.NewResponse();
      for (const std::string& output : request.RequestedOutputs()) {
        if (output.rfind("OUTPUT", 0) != 0) {
          throw tb::Error::InvalidArgument("identity: output '" + output +
                                           "' is not named OUTPUT<i>, so it has no INPUT<i>");
        }
        const tb::InputTensor input = request.Input("INPUT" + output.substr(6));
        input.CopyTo(
            response.AddOutput(output, input.dtype(), input.shape(), input.byte_size()).data());
      }
      response.Send();
    });
  }
};

TRITONSERVER_BACKEND(Identity)
