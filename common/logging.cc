#include "common/logging.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/log_file.h"

namespace ddp {
namespace {

LogLevel LevelFromEnvironment() {
  const char* env = std::getenv("DDP_LOG_LEVEL");
  LogLevel level = LogLevel::kInfo;
  if (env != nullptr) ParseLogLevel(env, &level);
  return level;
}

// The console's threshold (SetMinLogLevel).
std::atomic<int>& ConsoleLevelStorage() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnvironment())};
  return level;
}

// SetLogFile's descriptor (-1: none) and threshold.
std::atomic<int> log_file_fd{-1};
std::atomic<int> log_file_level{static_cast<int>(LogLevel::kInfo)};

void WriteWhole(int fd, const std::string& text) {
  // One write(2) per line keeps lines from different threads whole.
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
}

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 'D';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
    case LogLevel::kFatal:
      return 'F';
  }
  return '?';
}

const char* BaseName(const char* path) {
  // Keep the path from the repository root: drop Bazel's execroot prefixes if any.
  const char* slash = std::strrchr(path, '/');
  if (slash == nullptr) return path;
  const char* previous = slash;
  while (previous > path && *(previous - 1) != '/') --previous;
  return previous;
}

}  // namespace

void SetMinLogLevel(LogLevel level) { ConsoleLevelStorage().store(static_cast<int>(level)); }

LogLevel MinLogLevel() {
  const int console = ConsoleLevelStorage().load();
  if (log_file_fd.load() < 0) return static_cast<LogLevel>(console);
  return static_cast<LogLevel>(std::min(console, log_file_level.load()));
}

void SetLogFile(int fd, LogLevel level) {
  log_file_level.store(static_cast<int>(level));
  log_file_fd.store(fd);
}

bool ParseLogLevel(const std::string& text, LogLevel* level) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "debug") {
    *level = LogLevel::kDebug;
  } else if (lower == "info") {
    *level = LogLevel::kInfo;
  } else if (lower == "warning" || lower == "warn") {
    *level = LogLevel::kWarning;
  } else if (lower == "error") {
    *level = LogLevel::kError;
  } else {
    return false;
  }
  return true;
}

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  stream_ << absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone()) << ' '
          << LevelLetter(level) << ' ' << BaseName(file) << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string text = stream_.str();
  const int level = static_cast<int>(level_);
  if (level >= ConsoleLevelStorage().load() || level_ == LogLevel::kFatal) {
    WriteWhole(STDERR_FILENO, text);
  }
  const int file = log_file_fd.load();
  if (file >= 0 && level >= log_file_level.load()) WriteWhole(file, text);
  if (level_ == LogLevel::kFatal) std::abort();
}

bool LogRateLimit::Allow(int64_t* suppressed) {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t next = next_ns_.load(std::memory_order_relaxed);
  if (now < next || !next_ns_.compare_exchange_strong(next, now + static_cast<int64_t>(period_ns_),
                                                      std::memory_order_relaxed)) {
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  *suppressed = suppressed_.exchange(0, std::memory_order_relaxed);
  return true;
}

}  // namespace ddp
