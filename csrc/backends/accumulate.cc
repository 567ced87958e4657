// accumulate (stateful, sequence batching): a running sum per sequence.
// Each request adds the elements of INPUT (INT64) to its sequence's sum and
// gets OUTPUT (INT64, INPUT's shape) filled with the new sum. A request with
// the START flag begins its sequence at 0; after one with the END flag the
// sequence is forgotten. Sequences are told apart by correlation id; the
// core keeps each sequence on one instance, so each instance keeps its own
// sums and needs no lock.
#include <tritonserver/backend.h>

#include <unordered_map>

namespace tb = tritonserver::backend;

class Accumulate : public tb::Backend {
 public:
  using Sums = std::unordered_map<std::string, int64_t>;

  void ModelInitialize(tb::Model& model) override {
    if (!model.sequence_batching()) {
      throw tb::Error::InvalidArgument(
          "model '" + model.name() +
          "': the accumulate backend keeps state per sequence and needs "
          "sequence_batching in its configuration");
    }
  }

  void InstanceInitialize(tb::Instance& instance) override { instance.EmplaceState<Sums>(); }

  void Execute(tb::Instance& instance, tb::Requests& requests) override {
    Sums& sums = instance.State<Sums>();
    requests.ForEach([&](tb::Request& request) {
      const std::string key = request.correlation_id().Key();
      const uint32_t flags = request.flags();
      auto found = sums.find(key);
      if (flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_START) {
        found = sums.insert_or_assign(key, 0).first;
      } else if (found == sums.end()) {
        throw tb::Error::InvalidArgument("accumulate: sequence " + key +
                                         " has no running sum: start it with the START flag");
      }
      const tb::InputTensor input = request.Input("INPUT");
      for (const int64_t value : input.As<int64_t>()) found->second += value;
      const int64_t sum = found->second;
      if (flags & TRITONSERVER_REQUEST_FLAG_SEQUENCE_END) sums.erase(found);

      tb::Response response = request.NewResponse();
      for (int64_t& out :
           response.AddOutput("OUTPUT", TRITONSERVER_TYPE_INT64, input.shape()).As<int64_t>()) {
        out = sum;
      }
      response.Send();
    });
  }
};

TRITONSERVER_BACKEND(Accumulate)
