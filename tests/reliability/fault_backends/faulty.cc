// faulty (reliability test backend, on the SDK): an INT64 identity that
// fails where it is told to.
//
//  - model parameter "fail_load" = message: ModelInitialize throws it, so
//    the model never loads;
//  - a negative value in INPUT0: that request alone fails (INVALID_ARG),
//    the other requests of its batch are answered;
//  - request parameter "sleep_ms" = n: the request waits n ms first,
//    checking for cancellation every millisecond (CANCELLED if cancelled).
//
// OUTPUT0 = INPUT0; BATCH = [requests in this Execute call].
#include <tritonserver/backend.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

namespace tb = tritonserver::backend;

class Faulty : public tb::Backend {
 public:
  void ModelInitialize(tb::Model& model) override {
    if (const auto message = model.Parameter("fail_load")) {
      throw tb::Error::Internal("faulty: " + *message);
    }
  }

  void Execute(tb::Instance&, tb::Requests& requests) override {
    const int64_t batch = static_cast<int64_t>(requests.size());
    requests.ForEach([&](tb::Request& request) {
      const int64_t sleep_ms = request.IntParameter("sleep_ms").value_or(0);
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(std::max<int64_t>(sleep_ms, 0));
      while (std::chrono::steady_clock::now() < until) {
        if (request.IsCancelled()) {
          throw tb::Error::Cancelled("faulty: cancelled while sleeping");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      const tb::InputTensor input = request.Input("INPUT0");
      const tb::Span<const int64_t> values = input.As<int64_t>();
      for (const int64_t value : values) {
        if (value < 0) {
          throw tb::Error::InvalidArgument("faulty: negative value " + std::to_string(value));
        }
      }
      tb::Response response = request.NewResponse();
      response.SetOutput("OUTPUT0", input.shape(), values.data(), values.size());
      response.SetOutput("BATCH", {1}, &batch, 1);
      response.Send();
    });
  }
};

TRITONSERVER_BACKEND(Faulty)
