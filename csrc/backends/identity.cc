// identity: each requested output OUTPUT<i> is a copy of input INPUT<i>, with
// the same datatype (BYTES included) and shape.
//
// The parameters of Triton's identity backend that its QA configurations use
// (qa/L0_trace): "execute_delay_ms" (each execution waits that long first),
// and "enable_custom_tracing": "true", which reports custom trace activities
// for each traced request as Triton's does (CUSTOM_ACTIVITY_START and _END
// 100 ms apart, CUSTOM_SINGLE_ACTIVITY, then "nested_span_count" nested
// CUSTOM_ACTIVITY<n>_START ... _END, each 100 ms, with a CUSTOM_SINGLE_ACTIVITY
// in every "single_activity_frequency"-th), so trace mode opentelemetry turns
// them into spans.
#include <tritonserver/backend.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

namespace tb = tritonserver::backend;

namespace {

struct Settings {
  int64_t delay_ms = 0;
  bool custom_tracing = false;
  int64_t nested_span_count = 0;
  int64_t single_activity_frequency = 1;
};

int64_t Number(const tb::Model& model, const char* key, int64_t fallback) {
  const std::optional<std::string> text = model.Parameter(key);
  if (!text) return fallback;
  try {
    return std::stoll(*text);
  } catch (const std::exception&) {
    throw tb::Error::InvalidArgument("identity: model '" + model.name() + "': parameter '" + key +
                                     "' must be an integer, got '" + *text + "'");
  }
}

uint64_t Now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Triton's identity backend's custom activities, on `request`'s trace (if any).
void ReportCustomActivities(tb::Request& request, const Settings& settings) {
  TRITONSERVER_InferenceTrace* trace = nullptr;
  tb::Check(TRITONBACKEND_RequestTrace(request.handle(), &trace));
  if (trace == nullptr) return;
  auto report = [trace](const std::string& name) {
    tb::Check(TRITONSERVER_InferenceTraceReportActivity(trace, Now(), name.c_str()));
  };
  const auto pause = std::chrono::milliseconds(100);
  report("CUSTOM_ACTIVITY_START");
  std::this_thread::sleep_for(pause);
  report("CUSTOM_ACTIVITY_END");
  report("CUSTOM_SINGLE_ACTIVITY");
  const int64_t every =
      settings.single_activity_frequency > 0 ? settings.single_activity_frequency : 1;
  for (int64_t n = 0; n < settings.nested_span_count; ++n) {
    report("CUSTOM_ACTIVITY" + std::to_string(n) + "_START");
    std::this_thread::sleep_for(pause);
    if (n % every == 0) report("CUSTOM_SINGLE_ACTIVITY");
  }
  for (int64_t n = settings.nested_span_count - 1; n >= 0; --n) {
    report("CUSTOM_ACTIVITY" + std::to_string(n) + "_END");
  }
}

}  // namespace

class Identity : public tb::Backend {
 public:
  void ModelInitialize(tb::Model& model) override {
    Settings& settings = model.EmplaceState<Settings>();
    settings.delay_ms = Number(model, "execute_delay_ms", 0);
    settings.custom_tracing = model.Parameter("enable_custom_tracing") == "true";
    settings.nested_span_count = Number(model, "nested_span_count", 0);
    settings.single_activity_frequency = Number(model, "single_activity_frequency", 1);
  }

  void Execute(tb::Instance& instance, tb::Requests& requests) override {
    const Settings& settings = instance.model().State<Settings>();
    if (settings.delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(settings.delay_ms));
    }
    // A GPU instance asks for its outputs on its own device; whichever
    // memory the client's allocator gives, the copy goes straight there
    // (device to device when both sides are on a GPU).
    const bool on_gpu = instance.kind() == TRITONSERVER_INSTANCEGROUPKIND_GPU;
    const TRITONSERVER_MemoryType preferred =
        on_gpu ? TRITONSERVER_MEMORY_GPU : TRITONSERVER_MEMORY_CPU;
    const int64_t preferred_id = on_gpu ? instance.device_id() : 0;
    requests.ForEach([&](tb::Request& request) {
      if (settings.custom_tracing) ReportCustomActivities(request, settings);
      tb::Response response = request.NewResponse();
      for (const std::string& output : request.RequestedOutputs()) {
        if (output.rfind("OUTPUT", 0) != 0) {
          throw tb::Error::InvalidArgument("identity: output '" + output +
                                           "' is not named OUTPUT<i>, so it has no INPUT<i>");
        }
        const tb::InputTensor input = request.Input("INPUT" + output.substr(6));
        const tb::OutputTensor out = response.AddOutputBuffer(
            output, input.dtype(), input.shape(), input.byte_size(), preferred, preferred_id);
        input.CopyTo(out.data(), out.memory_type(), out.memory_type_id());
      }
      response.Send();
    });
  }
};

TRITONSERVER_BACKEND(Identity)
