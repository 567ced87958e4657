// add_sub: OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 - INPUT1,
// elementwise, for FP32 or INT32 inputs of one datatype and one shape.
#include <tritonserver/backend.h>

#include <type_traits>

namespace tb = tritonserver::backend;

namespace {

// Integers are added as unsigned so they wrap around on overflow (as numpy's
// do) instead of being undefined behaviour.
template <typename T, bool = std::is_integral_v<T>>
struct Arithmetic {
  using type = T;
};
template <typename T>
struct Arithmetic<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <typename T>
void Compute(tb::Request& request, const tb::InputTensor& a, const tb::InputTensor& b) {
  using W = typename Arithmetic<T>::type;
  const tb::Span<const T> x = a.As<T>();
  const tb::Span<const T> y = b.As<T>();
  tb::Response response = request.NewResponse();
  for (const std::string& name : request.RequestedOutputs()) {
    if (name != "OUTPUT0" && name != "OUTPUT1") {
      throw tb::Error::InvalidArgument("add_sub: unknown output '" + name +
                                       "'; it has OUTPUT0 (sum) and OUTPUT1 (difference)");
    }
    const tb::Span<T> out = response.AddOutput(name, a.dtype(), a.shape()).As<T>();
    const W sign = name == "OUTPUT0" ? W(1) : W(-1);
    for (size_t i = 0; i < x.size(); ++i) {
      out[i] = static_cast<T>(static_cast<W>(x[i]) + sign * static_cast<W>(y[i]));
    }
  }
  response.Send();
}

}  // namespace

class AddSub : public tb::Backend {
 public:
  void Execute(tb::Instance&, tb::Requests& requests) override {
    requests.ForEach([](tb::Request& request) {
      const tb::InputTensor a = request.Input("INPUT0");
      const tb::InputTensor b = request.Input("INPUT1");
      if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
        throw tb::Error::InvalidArgument(
            std::string("add_sub: INPUT0 is ") + tb::DataTypeName(a.dtype()) +
            tb::ShapeString(a.shape()) + " but INPUT1 is " + tb::DataTypeName(b.dtype()) +
            tb::ShapeString(b.shape()) + "; both inputs must have the same datatype and shape");
      }
      switch (a.dtype()) {
        case TRITONSERVER_TYPE_FP32:
          return Compute<float>(request, a, b);
        case TRITONSERVER_TYPE_INT32:
          return Compute<int32_t>(request, a, b);
        default:
          throw tb::Error::InvalidArgument(
              std::string("add_sub: inputs must be FP32 or INT32, not ") +
              tb::DataTypeName(a.dtype()));
      }
    });
  }
};

TRITONSERVER_BACKEND(AddSub)
