// c_api_bench: the benchmark workloads driven through the Triton C API
// directly, with no binding in between. It is the ceiling the Python API is
// compared with: same core, same model repository, same backend folder.
//
//   c_api_bench --model-repository DIR --backend-directory DIR
//               [--cache-directory DIR] [--model identity_fp32]
//               [--workloads sync,async64,large16MiB,threads4[,gpu16MiB]]
//               [--rounds 3] [--seconds 2.0] [--warmup-seconds 0.3]
//               [--min-requests 5] [--max-seconds 30] [--max-requests N]
//
// Prints one JSON object on stdout (per round, per workload: the figures);
// progress and errors go to stderr. Every loop ends on a time bound and a
// count bound; every wait is bounded.
//
// How each inference is made (the same work the Python API does per call):
// a new TRITONSERVER_InferenceRequest with one FP32 input appended from host
// memory and one requested output, a response allocator that mallocs host
// memory, a response callback that reads the output's description and
// deletes the response, and a release callback that deletes the request.
//
// gpu16MiB (asked for by name, needs a GPU; benchmarks/gpu.py runs it): the
// large16MiB request with its input in device memory (TRITONSERVER_MEMORY_GPU,
// GPU 0, written once before the runs) and a response allocator that
// cudaMallocs each output on the device and cudaFrees it on release, as the
// Python API's default GPU allocator does (device_memory.h); the CUDA runtime
// is the one the core loaded.

#include <sys/resource.h>

#include <triton/tritonserver.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core_calls.h"
#include "device_memory.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kInputName = "INPUT0";
constexpr const char* kOutputName = "OUTPUT0";
constexpr size_t kSmallCount = 16;                           // 16 FP32 values
constexpr size_t kLargeCount = (16u << 20) / sizeof(float);  // 16 MiB of FP32
constexpr int kAsyncInFlight = 64;
constexpr int kThreads = 4;
// No single response may take longer than this: past it the run is broken.
constexpr auto kResponseTimeout = std::chrono::seconds(60);

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "c_api_bench: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(2);
}

void Check(TRITONSERVER_Error* error, const char* what) {
  if (error == nullptr) return;
  std::string message = std::string(what) + ": " + TRITONSERVER_ErrorCodeString(error) + " - " +
                        TRITONSERVER_ErrorMessage(error);
  TRITONSERVER_ErrorDelete(error);
  Die(message);
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// ---- Settings -----------------------------------------------------------------

struct Settings {
  std::string repository;
  std::string backend_directory;
  std::string cache_directory;
  std::string model = "identity_fp32";
  std::vector<std::string> workloads = {"sync", "async64", "large16MiB", "threads4"};
  int rounds = 3;
  double seconds = 2.0;
  double warmup_seconds = 0.3;
  uint64_t min_requests = 5;
  double max_seconds = 30.0;
  uint64_t max_requests = 20000000;
};

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ',')) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

Settings ParseArguments(int argc, char** argv) {
  Settings s;
  std::map<std::string, std::string> values;
  for (int i = 1; i < argc; ++i) {
    std::string key = argv[i];
    if (key.rfind("--", 0) != 0 || i + 1 >= argc) {
      Die("bad argument '" + key + "' (every option takes a value)");
    }
    values[key.substr(2)] = argv[++i];
  }
  auto take = [&](const char* name, auto apply) {
    auto it = values.find(name);
    if (it == values.end()) return;
    try {
      apply(it->second);
    } catch (const std::exception&) {
      Die(std::string("bad value for --") + name + ": " + it->second);
    }
    values.erase(it);
  };
  take("model-repository", [&](const std::string& v) { s.repository = v; });
  take("backend-directory", [&](const std::string& v) { s.backend_directory = v; });
  take("cache-directory", [&](const std::string& v) { s.cache_directory = v; });
  take("model", [&](const std::string& v) { s.model = v; });
  take("workloads", [&](const std::string& v) { s.workloads = SplitCommas(v); });
  take("rounds", [&](const std::string& v) { s.rounds = std::stoi(v); });
  take("seconds", [&](const std::string& v) { s.seconds = std::stod(v); });
  take("warmup-seconds", [&](const std::string& v) { s.warmup_seconds = std::stod(v); });
  take("min-requests", [&](const std::string& v) { s.min_requests = std::stoull(v); });
  take("max-seconds", [&](const std::string& v) { s.max_seconds = std::stod(v); });
  take("max-requests", [&](const std::string& v) { s.max_requests = std::stoull(v); });
  if (!values.empty()) Die("unknown option --" + values.begin()->first);
  if (s.repository.empty() || s.backend_directory.empty()) {
    Die("--model-repository and --backend-directory are required");
  }
  if (s.rounds < 1 || s.seconds <= 0 || s.max_seconds < s.seconds) {
    Die("need --rounds >= 1, --seconds > 0 and --max-seconds >= --seconds");
  }
  for (const auto& w : s.workloads) {
    if (w != "sync" && w != "async64" && w != "large16MiB" && w != "threads4" && w != "gpu16MiB") {
      Die("unknown workload '" + w + "'");
    }
  }
  return s;
}

// ---- Completions ----------------------------------------------------------------

// Where the responses of the requests sent with it report. Sinks live until
// the server is deleted, so a callback may touch one after its waiter woke.
struct Sink {
  std::mutex mutex;
  std::condition_variable changed;
  int in_flight = 0;               // guarded by mutex
  const void* expected = nullptr;  // host memory
  size_t expected_bytes = 0;
  TRITONSERVER_MemoryType expected_memory = TRITONSERVER_MEMORY_CPU;  // where outputs go
  std::atomic<bool> verify_next{false};

  // The next response's output must equal `input`, in `memory` (what the
  // request's allocator gives).
  void Expect(const std::vector<float>& input,
              TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU) {
    expected = input.data();
    expected_bytes = input.size() * sizeof(float);
    expected_memory = memory;
    verify_next.store(true);
  }

  void Started() {
    std::lock_guard<std::mutex> lock(mutex);
    ++in_flight;
  }

  void Finished() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      --in_flight;
    }
    changed.notify_one();
  }

  // Wait until fewer than `limit` requests of this sink are in flight.
  void WaitBelow(int limit) {
    std::unique_lock<std::mutex> lock(mutex);
    if (!changed.wait_for(lock, kResponseTimeout, [&] { return in_flight < limit; })) {
      Die("no response within the time limit");
    }
  }
};

std::atomic<int64_t> g_live_requests{0};

void OnRequestRelease(TRITONSERVER_InferenceRequest* request, const uint32_t flags, void*) {
  if ((flags & TRITONSERVER_REQUEST_RELEASE_ALL) != 0) {
    Check(TRITONSERVER_InferenceRequestDelete(request), "deleting a request");
    g_live_requests.fetch_sub(1);
  }
}

void OnResponse(TRITONSERVER_InferenceResponse* response, const uint32_t flags, void* userp) {
  Sink* sink = static_cast<Sink*>(userp);
  if (response != nullptr) {
    Check(TRITONSERVER_InferenceResponseError(response), "inference failed");
    tritonbench::Output out;
    Check(tritonbench::ReadOutput(response, 0, &out), "reading the output");
    if (out.byte_size != sink->expected_bytes || out.datatype != TRITONSERVER_TYPE_FP32 ||
        out.dim_count != 1) {
      Die("the output does not have the input's type and size");
    }
    if (out.memory_type != sink->expected_memory) {
      Die(std::string("the output is in ") + TRITONSERVER_MemoryTypeString(out.memory_type) +
          " memory, not where its allocator put it");
    }
    if (sink->verify_next.exchange(false)) {
      const void* host = out.base;
      std::vector<char> copy;
      if (out.memory_type == TRITONSERVER_MEMORY_GPU) {  // read back through the host
        copy.resize(out.byte_size);
        const tritonbench::CudaRuntime& cuda = tritonbench::Cuda();
        const int status = cuda.memcpy(copy.data(), out.base, out.byte_size,
                                       tritonbench::CudaRuntime::kMemcpyDefault);
        if (status != 0) Die("reading the output from the device: " + cuda.Error(status));
        host = copy.data();
      }
      if (std::memcmp(host, sink->expected, out.byte_size) != 0) {
        Die("the output differs from the input");
      }
    }
    Check(TRITONSERVER_InferenceResponseDelete(response), "deleting a response");
  }
  if ((flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0) sink->Finished();
}

// ---- One inference -----------------------------------------------------------

struct Context {
  TRITONSERVER_Server* server = nullptr;
  TRITONSERVER_ResponseAllocator* allocator = nullptr;      // host memory
  TRITONSERVER_ResponseAllocator* gpu_allocator = nullptr;  // device memory (gpu16MiB)
  std::string model;
};

// A request's input: where its FP32 values lie, and the allocator its
// output gets.
struct Input {
  const void* data = nullptr;
  size_t count = 0;
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
  TRITONSERVER_ResponseAllocator* allocator = nullptr;
};

Input HostInput(const Context& ctx, const std::vector<float>& values) {
  return Input{values.data(), values.size(), TRITONSERVER_MEMORY_CPU, 0, ctx.allocator};
}

void Send(const Context& ctx, const Input& input, Sink* sink) {
  TRITONSERVER_InferenceRequest* request = nullptr;
  Check(TRITONSERVER_InferenceRequestNew(&request, ctx.server, ctx.model.c_str(), -1),
        "creating a request");
  const int64_t shape[1] = {static_cast<int64_t>(input.count)};
  Check(
      TRITONSERVER_InferenceRequestAddInput(request, kInputName, TRITONSERVER_TYPE_FP32, shape, 1),
      "adding the input");
  Check(TRITONSERVER_InferenceRequestAppendInputData(request, kInputName, input.data,
                                                     input.count * sizeof(float), input.memory_type,
                                                     input.memory_type_id),
        "appending input data");
  Check(TRITONSERVER_InferenceRequestAddRequestedOutput(request, kOutputName),
        "requesting the output");
  Check(TRITONSERVER_InferenceRequestSetReleaseCallback(request, OnRequestRelease, nullptr),
        "setting the release callback");
  Check(TRITONSERVER_InferenceRequestSetResponseCallback(request, input.allocator, nullptr,
                                                         OnResponse, sink),
        "setting the response callback");
  g_live_requests.fetch_add(1);
  sink->Started();
  // No lock is held here: the callbacks may run on this thread.
  Check(TRITONSERVER_ServerInferAsync(ctx.server, request, nullptr), "sending a request");
}

// ---- Workloads -------------------------------------------------------------------

struct Bounds {
  Clock::time_point start;
  Clock::time_point soft_end;  // stop here once min_requests are done...
  Clock::time_point hard_end;  // ...and here whatever the count
  uint64_t min_requests;
  uint64_t max_requests;

  Bounds(Clock::time_point t0, double seconds, double max_seconds, uint64_t min_n, uint64_t max_n)
      : start(t0),
        soft_end(t0 + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(seconds))),
        hard_end(t0 + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(max_seconds))),
        min_requests(min_n),
        max_requests(max_n) {}

  bool Done(Clock::time_point now, uint64_t count) const {
    if (count >= max_requests || now >= hard_end) return true;
    return now >= soft_end && count >= min_requests;
  }
};

struct Measured {
  uint64_t count = 0;
  double seconds = 0;
  std::vector<uint32_t> latencies_ns;  // sync only
};

// One request in flight: send, wait for the final response, repeat.
Measured RunSequential(const Context& ctx, const Input& input, Sink* sink, const Bounds& bounds,
                       bool record) {
  Measured m;
  if (record) m.latencies_ns.reserve(1 << 20);
  Clock::time_point now = Clock::now();
  while (!bounds.Done(now, m.count)) {
    const Clock::time_point sent = now;
    Send(ctx, input, sink);
    sink->WaitBelow(1);
    now = Clock::now();
    if (record) {
      m.latencies_ns.push_back(static_cast<uint32_t>(std::min<int64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(now - sent).count(), UINT32_MAX)));
    }
    ++m.count;
  }
  m.seconds = Seconds(now - bounds.start);
  return m;
}

// `depth` requests in flight: a new one goes out as soon as one completes.
Measured RunPipelined(const Context& ctx, const Input& input, Sink* sink, const Bounds& bounds,
                      int depth) {
  Measured m;
  Clock::time_point now = Clock::now();
  while (!bounds.Done(now, m.count)) {
    sink->WaitBelow(depth);
    Send(ctx, input, sink);
    ++m.count;
    now = Clock::now();
  }
  sink->WaitBelow(1);  // every request sent has completed
  m.seconds = Seconds(Clock::now() - bounds.start);
  return m;
}

// `threads` threads, each with one request in flight, started together.
Measured RunThreads(const Context& ctx, const Input& input, std::vector<Sink>& sinks,
                    const Settings& s, double seconds, int threads) {
  std::mutex mutex;
  std::condition_variable go;
  bool started = false;
  Clock::time_point start;
  std::vector<uint64_t> counts(threads, 0);
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] {
      Clock::time_point t0;
      {
        std::unique_lock<std::mutex> lock(mutex);
        if (!go.wait_for(lock, std::chrono::seconds(30), [&] { return started; })) {
          Die("worker thread was never started");
        }
        t0 = start;
      }
      Bounds bounds(t0, seconds, s.max_seconds, s.min_requests, s.max_requests);
      counts[i] = RunSequential(ctx, input, &sinks[i], bounds, false).count;
    });
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    start = Clock::now();
    started = true;
  }
  go.notify_all();
  for (auto& w : workers) w.join();
  Measured m;
  m.seconds = Seconds(Clock::now() - start);
  for (uint64_t c : counts) m.count += c;
  return m;
}

double PercentileUs(std::vector<uint32_t> values, double percent) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  // Nearest rank: the smallest value with at least `percent` % at or below it.
  size_t rank = static_cast<size_t>(percent / 100.0 * values.size() + 0.999999);
  rank = std::min(std::max<size_t>(rank, 1), values.size());
  return values[rank - 1] / 1000.0;
}

std::string Number(double v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.6g", v);
  return text;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\u%04x", c);
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void WaitForReleases() {
  const auto limit = Clock::now() + kResponseTimeout;
  while (g_live_requests.load() != 0) {
    if (Clock::now() > limit) Die("requests were never released");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// What the process has spent so far, all its threads together (the core's
// too): CPU seconds, of them in the kernel, and context switches.
struct Usage {
  double cpu_s = 0, sys_s = 0, switches = 0;
  static Usage Now() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    auto secs = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
    return {secs(u.ru_utime) + secs(u.ru_stime), secs(u.ru_stime),
            static_cast<double>(u.ru_nvcsw + u.ru_nivcsw)};
  }
};

// The per-request costs since `before` as JSON fields (", ..."), the names
// the Python workers use (tsbench/loops.py).
std::string Costs(const Usage& before, uint64_t count) {
  if (count == 0) return "";
  const Usage after = Usage::Now();
  const double n = static_cast<double>(count);
  return ", \"cpu_us\": " + Number((after.cpu_s - before.cpu_s) / n * 1e6) +
         ", \"sys_us\": " + Number((after.sys_s - before.sys_s) / n * 1e6) +
         ", \"switches\": " + Number((after.switches - before.switches) / n);
}

// The values the workloads send, and the 16 MiB of them in device memory
// for gpu16MiB (null unless it is asked for).
struct Data {
  std::vector<float> small;
  std::vector<float> large;
  void* device_large = nullptr;
};

// Runs one workload once (after a warm-up) and returns its JSON object.
std::string RunWorkload(const Context& ctx, const Settings& s, const std::string& workload,
                        const Data& data, Sink* single, std::vector<Sink>& per_thread) {
  const std::vector<float>& small = data.small;
  const std::vector<float>& large = data.large;
  const Input small_input = HostInput(ctx, small);
  auto warmup_bounds = [&](double seconds) {
    return Bounds(Clock::now(), seconds, std::max(seconds, s.max_seconds), 1, s.max_requests);
  };
  auto full_bounds = [&] {
    return Bounds(Clock::now(), s.seconds, s.max_seconds, s.min_requests, s.max_requests);
  };
  std::ostringstream json;
  if (workload == "sync") {
    single->Expect(small);
    RunSequential(ctx, small_input, single, warmup_bounds(s.warmup_seconds), false);
    const Usage before = Usage::Now();
    Measured m = RunSequential(ctx, small_input, single, full_bounds(), true);
    const std::string costs = Costs(before, m.count);
    json << "{\"ips\": " << Number(m.count / m.seconds)
         << ", \"p50_us\": " << Number(PercentileUs(m.latencies_ns, 50))
         << ", \"p99_us\": " << Number(PercentileUs(m.latencies_ns, 99)) << ", \"n\": " << m.count
         << ", \"seconds\": " << Number(m.seconds) << costs << "}";
  } else if (workload == "async64") {
    single->Expect(small);
    RunPipelined(ctx, small_input, single, warmup_bounds(s.warmup_seconds), kAsyncInFlight);
    const Usage before = Usage::Now();
    Measured m = RunPipelined(ctx, small_input, single, full_bounds(), kAsyncInFlight);
    json << "{\"ips\": " << Number(m.count / m.seconds) << ", \"n\": " << m.count
         << ", \"seconds\": " << Number(m.seconds) << Costs(before, m.count) << "}";
  } else if (workload == "large16MiB" || workload == "gpu16MiB") {
    const bool gpu = workload == "gpu16MiB";
    // gpu16MiB: the same values, already on GPU 0; outputs on the device.
    const Input input =
        gpu ? Input{data.device_large, large.size(), TRITONSERVER_MEMORY_GPU, 0, ctx.gpu_allocator}
            : HostInput(ctx, large);
    single->Expect(large, gpu ? TRITONSERVER_MEMORY_GPU : TRITONSERVER_MEMORY_CPU);
    RunSequential(ctx, input, single, warmup_bounds(s.warmup_seconds), false);
    Measured m = RunSequential(ctx, input, single, full_bounds(), false);
    const double bytes = static_cast<double>(large.size() * sizeof(float));
    json << "{\"gbps\": " << Number(m.count * bytes / m.seconds / 1e9)
         << ", \"ips\": " << Number(m.count / m.seconds) << ", \"n\": " << m.count
         << ", \"seconds\": " << Number(m.seconds) << "}";
  } else {  // threads4
    for (auto& sink : per_thread) sink.Expect(small);
    RunThreads(ctx, small_input, per_thread, s, s.warmup_seconds, kThreads);
    const Usage before = Usage::Now();
    Measured m = RunThreads(ctx, small_input, per_thread, s, s.seconds, kThreads);
    json << "{\"ips\": " << Number(m.count / m.seconds) << ", \"n\": " << m.count
         << ", \"seconds\": " << Number(m.seconds) << Costs(before, m.count) << "}";
  }
  WaitForReleases();
  return json.str();
}

TRITONSERVER_Server* StartServer(const Settings& s) {
  TRITONSERVER_ServerOptions* options = nullptr;
  Check(TRITONSERVER_ServerOptionsNew(&options), "creating server options");
  Check(TRITONSERVER_ServerOptionsSetModelRepositoryPath(options, s.repository.c_str()),
        "setting the model repository");
  Check(TRITONSERVER_ServerOptionsSetBackendDirectory(options, s.backend_directory.c_str()),
        "setting the backend directory");
  if (!s.cache_directory.empty()) {
    Check(TRITONSERVER_ServerOptionsSetCacheDirectory(options, s.cache_directory.c_str()),
          "setting the cache directory");
  }
  Check(TRITONSERVER_ServerOptionsSetModelControlMode(options, TRITONSERVER_MODEL_CONTROL_NONE),
        "setting the model control mode");
  // Left unset, core 2.51 retries a model that fails to load forever.
  Check(TRITONSERVER_ServerOptionsSetModelLoadRetryCount(options, 0),
        "setting the model load retry count");
  Check(TRITONSERVER_ServerOptionsSetStrictModelConfig(options, true),
        "setting strict model config");
  Check(TRITONSERVER_ServerOptionsSetExitTimeout(options, 10), "setting the exit timeout");
  Check(TRITONSERVER_ServerOptionsSetLogInfo(options, false), "log info");
  Check(TRITONSERVER_ServerOptionsSetLogWarn(options, false), "log warn");
  Check(TRITONSERVER_ServerOptionsSetLogError(options, true), "log error");
  // The same metrics settings as the Python API's defaults.
  Check(TRITONSERVER_ServerOptionsSetMetrics(options, true), "metrics");
  Check(TRITONSERVER_ServerOptionsSetGpuMetrics(options, true), "gpu metrics");
  Check(TRITONSERVER_ServerOptionsSetCpuMetrics(options, true), "cpu metrics");
  TRITONSERVER_Server* server = nullptr;
  Check(TRITONSERVER_ServerNew(&server, options), "starting the server");
  Check(TRITONSERVER_ServerOptionsDelete(options), "deleting server options");

  const auto limit = Clock::now() + std::chrono::seconds(60);
  bool ready = false;
  while (true) {
    Check(TRITONSERVER_ServerModelIsReady(server, s.model.c_str(), -1, &ready),
          "asking whether the model is ready");
    if (ready) break;
    if (Clock::now() > limit) Die("model " + s.model + " never became ready");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return server;
}

}  // namespace

int main(int argc, char** argv) {
  const Settings s = ParseArguments(argc, argv);

  uint32_t api_major = 0, api_minor = 0;
  Check(TRITONSERVER_ApiVersion(&api_major, &api_minor), "reading the API version");

  const Clock::time_point t0 = Clock::now();
  Context ctx;
  ctx.model = s.model;
  ctx.server = StartServer(s);
  const double startup_seconds = Seconds(Clock::now() - t0);
  Check(TRITONSERVER_ResponseAllocatorNew(&ctx.allocator, tritonbench::AllocateHost,
                                          tritonbench::ReleaseHost, nullptr),
        "creating the response allocator");

  auto wants = [&](const char* workload) {
    return std::find(s.workloads.begin(), s.workloads.end(), workload) != s.workloads.end();
  };
  Data data;
  data.small.resize(kSmallCount);
  for (size_t i = 0; i < data.small.size(); ++i) data.small[i] = static_cast<float>(i);
  if (wants("large16MiB") || wants("gpu16MiB")) {
    data.large.resize(kLargeCount);
    for (size_t i = 0; i < data.large.size(); ++i) {
      data.large[i] = static_cast<float>(i % 1024);
    }
  }
  const tritonbench::CudaRuntime* cuda = nullptr;
  if (wants("gpu16MiB")) {
    cuda = &tritonbench::Cuda();
    if (!cuda->problem.empty()) Die("gpu16MiB needs a GPU: " + cuda->problem);
    const size_t bytes = data.large.size() * sizeof(float);
    tritonbench::OnDevice on(0);
    int status = cuda->malloc(&data.device_large, bytes);
    if (status != 0) Die("cudaMalloc of the input: " + cuda->Error(status));
    status = cuda->memcpy(data.device_large, data.large.data(), bytes,
                          tritonbench::CudaRuntime::kMemcpyDefault);
    if (status != 0) Die("copying the input to the device: " + cuda->Error(status));
    Check(TRITONSERVER_ResponseAllocatorNew(&ctx.gpu_allocator, tritonbench::AllocateDevice,
                                            tritonbench::ReleaseDevice, nullptr),
          "creating the device response allocator");
  }
  auto* single = new Sink();  // never freed: see Sink
  auto* per_thread = new std::vector<Sink>(kThreads);

  std::ostringstream out;
  out << "{\"system\": \"c-api\", \"api_version\": \"" << api_major << "." << api_minor
      << "\", \"startup_s\": " << Number(startup_seconds) << ", \"rounds\": [";
  for (int round = 0; round < s.rounds; ++round) {
    out << (round ? ", " : "") << "{";
    for (size_t i = 0; i < s.workloads.size(); ++i) {
      const std::string& w = s.workloads[i];
      std::string figures = RunWorkload(ctx, s, w, data, single, *per_thread);
      std::fprintf(stderr, "c-api round %d %s %s\n", round + 1, w.c_str(), figures.c_str());
      out << (i ? ", " : "") << JsonString(w) << ": " << figures;
    }
    out << "}";
  }
  out << "]}";

  Check(TRITONSERVER_ResponseAllocatorDelete(ctx.allocator), "deleting the response allocator");
  if (ctx.gpu_allocator != nullptr) {
    Check(TRITONSERVER_ResponseAllocatorDelete(ctx.gpu_allocator),
          "deleting the device response allocator");
  }
  Check(TRITONSERVER_ServerStop(ctx.server), "stopping the server");
  Check(TRITONSERVER_ServerDelete(ctx.server), "deleting the server");
  if (data.device_large != nullptr) cuda->free(data.device_large);
  std::printf("%s\n", out.str().c_str());
  std::fflush(stdout);
  return 0;
}
