// repeat (decoupled): for an INT32 input IN of N values, sends N responses,
// each with one value in OUT (shape [1]), in order, then the final flag.
#include <tritonserver/backend.h>

namespace tb = tritonserver::backend;

class Repeat : public tb::Backend {
 public:
  void ModelInitialize(tb::Model& model) override {
    if (!model.decoupled()) {
      throw tb::Error::InvalidArgument(
          "model '" + model.name() +
          "': the repeat backend sends several responses per request and "
          "needs model_transaction_policy { decoupled: true }");
    }
  }

  void Execute(tb::Instance&, tb::Requests& requests) override {
    requests.ForEach([](tb::Request& request) {
      for (const int32_t value : request.Input("IN").As<int32_t>()) {
        if (request.IsCancelled()) {
          throw tb::Error::Cancelled("the request was cancelled");
        }
        tb::Response response = request.NewResponse();
        response.SetOutput("OUT", {1}, &value, 1);
        response.Send(/*final=*/false);
      }
      request.Finish();
    });
  }
};

TRITONSERVER_BACKEND(Repeat)
