#ifndef DDP_COMMON_LOGGING_H_
#define DDP_COMMON_LOGGING_H_

// Minimal timestamped logging to stderr (Debian's Abseil has no absl/log):
//   DDP_LOG(INFO) << "listening on " << address;
// prints `2026-11-23T00:55:26.123456Z I coordinator/main.cc:42] listening on ...`.
// Lines are written whole (one write per line), so threads do not interleave.

#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>

namespace ddp {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };

// Messages below this level are dropped. Default: kInfo; DDP_LOG_LEVEL=debug|info|warning|error
// in the environment overrides it at start-up.
void SetMinLogLevel(LogLevel level);
LogLevel MinLogLevel();
// Parses "debug", "info", "warning", "error" (case-insensitive). False on anything else.
bool ParseLogLevel(const std::string& text, LogLevel* level);

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();  // Writes the line; aborts after a kFatal message.
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// One call site's rate limit for DDP_LOG_EVERY_N_SEC: true at most once per
// `period` (thread-safe; the first call is always true). Counts what it
// suppressed, so the next line can say how many were left out.
class LogRateLimit {
 public:
  explicit LogRateLimit(double period_seconds) : period_ns_(period_seconds * 1e9) {}
  // True when a line may be written now; `*suppressed` gets how many calls
  // were dropped since the last written line.
  bool Allow(int64_t* suppressed);

 private:
  const double period_ns_;
  std::atomic<int64_t> next_ns_{0};
  std::atomic<int64_t> suppressed_{0};
};

// Swallows the stream when the level is disabled.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace ddp

#define DDP_LOG_LEVEL_DEBUG ::ddp::LogLevel::kDebug
#define DDP_LOG_LEVEL_INFO ::ddp::LogLevel::kInfo
#define DDP_LOG_LEVEL_WARNING ::ddp::LogLevel::kWarning
#define DDP_LOG_LEVEL_ERROR ::ddp::LogLevel::kError
#define DDP_LOG_LEVEL_FATAL ::ddp::LogLevel::kFatal

#define DDP_LOG(severity)                           \
  (DDP_LOG_LEVEL_##severity < ::ddp::MinLogLevel()) \
      ? (void)0                                     \
      : ::ddp::LogVoidify() &                       \
            ::ddp::LogMessage(DDP_LOG_LEVEL_##severity, __FILE__, __LINE__).stream()

// Like DDP_LOG, but writes at most one line per `seconds` from this call site
// (for conditions that repeat, such as a failing disk retried every 200 ms);
// a written line ends with how many were left out.
#define DDP_LOG_EVERY_N_SEC(severity, seconds)                                                    \
  for (                                                                                           \
      int64_t ddp_suppressed_ = 0, ddp_once_ =                                                    \
                                       [&ddp_suppressed_] {                                       \
                                         static ::ddp::LogRateLimit ddp_limit_(seconds);          \
                                         return ddp_limit_.Allow(&ddp_suppressed_) ? 1 : 0;       \
                                       }();                                                       \
      ddp_once_ != 0; ddp_once_ = 0)                                                              \
  DDP_LOG(severity) << (ddp_suppressed_ > 0                                                       \
                            ? "(" + std::to_string(ddp_suppressed_) + " similar lines left out) " \
                            : std::string())

#define DDP_CHECK(condition)                                                                \
  (condition) ? (void)0                                                                     \
              : ::ddp::LogVoidify() &                                                       \
                    ::ddp::LogMessage(::ddp::LogLevel::kFatal, __FILE__, __LINE__).stream() \
                        << "Check failed: " #condition " "

#endif  // DDP_COMMON_LOGGING_H_
