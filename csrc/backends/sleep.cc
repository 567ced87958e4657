// sleep: each request waits DELAY_US microseconds (INT64; the largest of its
// values), then gets WAITED_US (INT64, DELAY_US's shape) = the microseconds it
// actually waited. The requests of one batch wait together, as one batched
// computation would. A request that is cancelled while waiting fails
// CANCELLED; one whose client timeout (timeout_us) passes first fails
// UNAVAILABLE. For timeout, cancellation and concurrency tests.
#include <tritonserver/backend.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace tb = tritonserver::backend;

class Sleep : public tb::Backend {
 public:
  void Execute(tb::Instance&, tb::Requests& requests) override {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    struct Wait {
      tb::Request* request;
      std::vector<int64_t> shape;
      Clock::time_point done;
      Clock::time_point give_up;  // the client's timeout
    };
    std::vector<Wait> waits;
    requests.ForEach([&](tb::Request& request) {
      const tb::InputTensor delay = request.Input("DELAY_US");
      int64_t us = 0;
      for (const int64_t value : delay.As<int64_t>()) us = std::max(us, value);
      const uint64_t timeout = request.timeout_us();
      waits.push_back(
          {&request, delay.shape(), start + std::chrono::microseconds(us),
           timeout ? start + std::chrono::microseconds(timeout) : Clock::time_point::max()});
    });

    // Poll every millisecond at most, so cancellation is noticed promptly.
    const auto poll = std::chrono::milliseconds(1);
    for (size_t left = waits.size(); left > 0;) {
      Clock::time_point next = Clock::now() + poll;
      for (const Wait& w : waits) {
        if (!w.request->finished()) next = std::min({next, w.done, w.give_up});
      }
      std::this_thread::sleep_until(next);
      const Clock::time_point now = Clock::now();
      left = 0;
      for (Wait& w : waits) {
        tb::Request& request = *w.request;
        if (request.finished()) continue;
        if (request.IsCancelled()) {
          request.Fail(tb::Error::Cancelled("sleep: the request was cancelled"));
        } else if (now >= w.done) {
          const int64_t waited =
              std::chrono::duration_cast<std::chrono::microseconds>(now - start).count();
          request.Try([&](tb::Request& r) {
            tb::Response response = r.NewResponse();
            for (int64_t& out :
                 response.AddOutput("WAITED_US", TRITONSERVER_TYPE_INT64, w.shape).As<int64_t>()) {
              out = waited;
            }
            response.Send();
          });
        } else if (now >= w.give_up) {
          request.Fail(tb::Error::Unavailable("sleep: the request timed out after " +
                                              std::to_string(request.timeout_us()) + " us"));
        } else {
          ++left;
        }
      }
    }
  }
};

TRITONSERVER_BACKEND(Sleep)
