// scale: OUTPUT = INPUT * factor (FP32), where factor is the model's
// configuration parameter "factor" (default 1).
#include <tritonserver/backend.h>

#include <cstdlib>
#include <string>

namespace tb = tritonserver::backend;

class Scale : public tb::Backend {
 public:
  // Once per model load: read the factor and keep it with the model.
  void ModelInitialize(tb::Model& model) override {
    const std::string text = model.Parameter("factor").value_or("1");
    char* end = nullptr;
    const float factor = std::strtof(text.c_str(), &end);
    if (text.empty() || *end != '\0') {
      throw tb::Error::InvalidArgument("model '" + model.name() +
                                       "': parameter 'factor' must be a "
                                       "number, not '" +
                                       text + "'");
    }
    model.EmplaceState<float>(factor);
  }

  // One batch of requests on one instance; a request that throws fails
  // alone.
  void Execute(tb::Instance& instance, tb::Requests& requests) override {
    const float factor = instance.model().State<float>();
    requests.ForEach([&](tb::Request& request) {
      const tb::InputTensor input = request.Input("INPUT");
      const tb::Span<const float> in = input.As<float>();
      tb::Response response = request.NewResponse();
      tb::Span<float> out =
          response.AddOutput("OUTPUT", TRITONSERVER_TYPE_FP32, input.shape()).As<float>();
      for (size_t i = 0; i < in.size(); ++i) out[i] = in[i] * factor;
      response.Send();
    });
  }
};

TRITONSERVER_BACKEND(Scale)
