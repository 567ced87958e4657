// A fatal signal's native report: when this process dies of SIGSEGV, SIGBUS,
// SIGILL, SIGFPE or SIGABRT, a debugger (gdb, prepared beforehand) attaches
// to it while the crashing thread waits in the handler, and prints every
// thread's native backtrace, C++ frames of the core and the backends
// included, to standard error. Then the handler that was there before
// (Python's faulthandler, which adds the Python frames, or the default)
// takes the signal as if this one had never been installed.
//
// The core's threads run no Python: faulthandler alone names only the
// threads that do, so a crash on a core thread showed nothing of where it
// was. Opt-in (tritonserver._crash_report): the test suite and `serve`
// under TRITONSERVER_CRASH_REPORT turn it on.
//
// Only async-signal-safe calls run in the handler: the debugger's argv and
// environment are built at install time, the child is made with the raw
// fork system call (glibc's fork() runs atfork handlers that take malloc's
// locks, which the crashing thread may hold), and the wait is a poll.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;

extern char** environ;

namespace tritonpy {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr const char* kNames[] = {" (SIGSEGV)", " (SIGBUS)", " (SIGILL)", " (SIGFPE)",
                                  " (SIGABRT)"};
constexpr int kSignalCount = sizeof(kSignals) / sizeof(kSignals[0]);

struct Report {
  int fd = STDERR_FILENO;   // where the report goes
  char context[512] = {0};  // what the process was doing (a test's name)
  std::vector<std::string> args;
  std::vector<char*> argv;  // points into args; null-terminated
  int pid_arg = -1;         // the argument "{pid}" stood for: this process's id
  char pid_text[24] = {0};  // written at the crash (a forked child reports itself)
  int timeout_ms = 0;
  struct sigaction previous[kSignalCount];
  bool installed = false;
};

Report* report = nullptr;  // never freed: a handler may run at any time
volatile sig_atomic_t reporting = 0;

void Write(const char* text) {
  size_t left = strlen(text);
  while (left > 0) {
    const ssize_t n = write(report != nullptr ? report->fd : STDERR_FILENO, text, left);
    if (n <= 0) {
      return;
    }
    text += n;
    left -= static_cast<size_t>(n);
  }
}

// `value` in decimal into `out` (at least 24 bytes), null-terminated.
void FormatNumber(long value, char* out) {
  char digits[24];
  int i = sizeof(digits) - 1;
  digits[i] = '\0';
  const bool negative = value < 0;
  unsigned long v = negative ? -static_cast<unsigned long>(value) : value;
  do {
    digits[--i] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && i > 1);
  if (negative) {
    digits[--i] = '-';
  }
  int j = 0;
  while (digits[i] != '\0') {
    out[j++] = digits[i++];
  }
  out[j] = '\0';
}

void WriteNumber(long value) {
  char text[24];
  FormatNumber(value, text);
  Write(text);
}

pid_t RawFork() {
#ifdef SYS_fork
  return static_cast<pid_t>(syscall(SYS_fork));
#else
  return static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
#endif
}

void SleepMs(long ms) {
  struct timespec t;
  t.tv_sec = ms / 1000;
  t.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&t, nullptr);
}

// The last bytes written to `fd` when it is a regular file (a test runner
// captures a test's output in one): the server's log before the crash.
void WriteTail(int fd, const char* label) {
  if (fd == report->fd) {
    return;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    return;
  }
  char tail[8192];
  const off_t size = st.st_size;
  const off_t from = size > static_cast<off_t>(sizeof(tail)) ? size - sizeof(tail) : 0;
  const ssize_t n = pread(fd, tail, static_cast<size_t>(size - from), from);
  if (n <= 0) {
    return;
  }
  Write("tritonserver: the last ");
  WriteNumber(static_cast<long>(n));
  Write(" bytes of this process's ");
  Write(label);
  Write(" (captured in a file) before the crash:\n");
  const ssize_t written = write(report->fd, tail, static_cast<size_t>(n));
  (void)written;
  Write("\ntritonserver: end of ");
  Write(label);
  Write("\n");
}

// The debugger, attached to this process; returns when it is done or after
// the report's timeout.
void RunDebugger() {
  int gate[2];
  if (pipe(gate) != 0) {
    Write("tritonserver: no native report (pipe failed)\n");
    return;
  }
  const pid_t child = RawFork();
  if (child < 0) {
    Write("tritonserver: no native report (fork failed)\n");
    close(gate[0]);
    close(gate[1]);
    return;
  }
  if (child == 0) {
    close(gate[1]);
    char go = 0;
    // Wait until the parent allowed this process to trace it (Yama).
    while (read(gate[0], &go, 1) < 0) {
    }
    close(gate[0]);
    dup2(report->fd, STDOUT_FILENO);
    dup2(report->fd, STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
    }
    execve(report->argv[0], report->argv.data(), environ);
    _exit(127);
  }
  close(gate[0]);
  // Yama's restricted mode lets only an ancestor trace a process, unless
  // that process names the tracer.
  prctl(PR_SET_PTRACER, child, 0, 0, 0);
  const char go = 1;
  (void)!write(gate[1], &go, 1);
  close(gate[1]);
  long waited = 0;
  int status = 0;
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (waited >= report->timeout_ms) {
      Write("tritonserver: the debugger took too long; stopped\n");
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return;
    }
    SleepMs(50);
    waited += 50;
  }
}

void OnFatalSignal(int sig, siginfo_t* info, void* context) {
  int index = 0;
  while (index < kSignalCount && kSignals[index] != sig) {
    ++index;
  }
  if (reporting == 0 && report != nullptr && index < kSignalCount) {
    reporting = 1;
    Write("\ntritonserver: fatal signal ");
    WriteNumber(sig);
    Write(kNames[index]);
    Write(" in thread ");
    WriteNumber(static_cast<long>(syscall(SYS_gettid)));
    Write(" of process ");
    WriteNumber(static_cast<long>(getpid()));
    if (report->context[0] != '\0') {
      Write(", during ");
      Write(report->context);
    }
    Write("\n");
    WriteTail(STDOUT_FILENO, "standard output");
    WriteTail(STDERR_FILENO, "standard error");
    Write("tritonserver: native backtraces of every thread (gdb):\n");
    if (report->pid_arg >= 0) {
      FormatNumber(static_cast<long>(getpid()), report->pid_text);
      report->argv[report->pid_arg] = report->pid_text;
    }
    RunDebugger();
    Write("tritonserver: end of the native report\n");
  }
  // Hand the signal to whoever had it before: it is blocked while this
  // handler runs, so it arrives as soon as the handler returns (a fault
  // also comes again when the faulting instruction runs again).
  if (report != nullptr && index < kSignalCount) {
    sigaction(sig, &report->previous[index], nullptr);
  } else {
    signal(sig, SIG_DFL);
  }
  if (info == nullptr || info->si_code <= 0 || sig == SIGABRT) {
    syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig);
  }
  (void)context;
}

// A second call replaces the command, the timeout and the file descriptor
// (the handlers stay, chained to what was there before the first).
void Install(const std::vector<std::string>& args, double timeout_s, int fd) {
  if (args.empty() || args[0].empty() || args[0][0] != '/') {
    throw py::value_error("the debugger's command line must start with an absolute path");
  }
  if (fcntl(fd, F_GETFD) < 0) {
    throw py::value_error("the crash report's file descriptor is not open");
  }
  if (report == nullptr) {
    report = new Report();
  }
  reporting = 1;  // no report while the command changes
  report->fd = fd;
  report->args = args;
  report->argv.clear();
  report->pid_arg = -1;
  for (std::string& arg : report->args) {
    if (arg == "{pid}") {
      report->pid_arg = static_cast<int>(report->argv.size());
    }
    report->argv.push_back(&arg[0]);
  }
  report->argv.push_back(nullptr);
  report->timeout_ms = static_cast<int>(timeout_s * 1000);
  reporting = 0;
  if (report->installed) {
    return;
  }
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_sigaction = OnFatalSignal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < kSignalCount; ++i) {
    sigaction(kSignals[i], &action, &report->previous[i]);
  }
  report->installed = true;
}

}  // namespace

void RegisterCrashReport(py::module_& m) {
  m.def("install_crash_report", &Install, py::arg("debugger_argv"), py::arg("timeout_s"),
        py::arg("fd"),
        "On a fatal signal, write a report to fd: the context, the tails of stdout and stderr "
        "where they are files, then debugger_argv's output (prepared now: its first item an "
        "absolute path, an item \"{pid}\" the crashing process's id), waiting up to timeout_s; "
        "then pass the signal to the handler installed before.");
  m.def(
      "set_crash_report_context",
      [](const std::string& context) {
        if (report == nullptr) {
          report = new Report();
        }
        const size_t n = std::min(context.size(), sizeof(report->context) - 1);
        report->context[0] = '\0';  // never a half-written name with a stale end
        memcpy(report->context + 1, context.data() + 1, n > 0 ? n - 1 : 0);
        report->context[n] = '\0';
        if (n > 0) {
          report->context[0] = context[0];
        }
      },
      py::arg("context"), "What the process is doing, named in a crash report.");
  m.def("crash_report_installed", [] { return report != nullptr && report->installed; });
}

}  // namespace tritonpy
