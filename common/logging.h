#ifndef DDP_COMMON_LOGGING_H_
#define DDP_COMMON_LOGGING_H_

// Minimal timestamped logging to stderr (Debian's Abseil has no absl/log):
//   DDP_LOG(INFO) << "listening on " << address;
// prints `2026-11-23T00:55:26.123456Z I coordinator/main.cc:42] listening on ...`.
// Lines are written whole (one write per line), so threads do not interleave.

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

#define DDP_LOG(severity)                                               \
  (DDP_LOG_LEVEL_##severity < ::ddp::MinLogLevel())                     \
      ? (void)0                                                         \
      : ::ddp::LogVoidify() &                                           \
            ::ddp::LogMessage(DDP_LOG_LEVEL_##severity, __FILE__, __LINE__) \
                .stream()

#define DDP_CHECK(condition)                                              \
  (condition) ? (void)0                                                   \
              : ::ddp::LogVoidify() &                                     \
                    ::ddp::LogMessage(::ddp::LogLevel::kFatal, __FILE__, __LINE__) \
                            .stream()                                     \
                        << "Check failed: " #condition " "

#endif  // DDP_COMMON_LOGGING_H_
