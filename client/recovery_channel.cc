#include "client/recovery_channel.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/worker_files.h"
#include "common/logging.h"

namespace ddp::client {
namespace {

constexpr size_t kMaxReportBytes = 128;

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace

absl::StatusOr<RecoveryReport> ParseRecoveryReport(const std::string& text) {
  const std::string shown = text.substr(0, 64);
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("recovery state \"", absl::CEscape(shown),
                                                   "\" is not \"running|parked GENERATION PID\""));
  };
  std::vector<std::string> parts =
      absl::StrSplit(absl::StripTrailingAsciiWhitespace(text), ' ', absl::SkipEmpty());
  if (parts.size() != 3) return bad();
  RecoveryReport report;
  if (parts[0] == "running") {
    report.state = RecoveryReport::State::kRunning;
  } else if (parts[0] == "parked") {
    report.state = RecoveryReport::State::kParked;
  } else {
    return bad();
  }
  int pid = 0;
  if (!absl::SimpleAtoi(parts[1], &report.generation) || report.generation < 0 ||
      !absl::SimpleAtoi(parts[2], &pid) || pid <= 0) {
    return bad();
  }
  report.pid = pid;
  return report;
}

std::string AbandonMessage(int64_t generation) {
  return absl::StrCat("{\"op\":\"abandon\",\"generation\":", generation, "}\n");
}

std::string JoinMessage(int64_t generation, const EnvMap& env) {
  std::string out = absl::StrCat("{\"op\":\"join\",\"generation\":", generation, ",\"env\":{");
  bool first = true;
  for (const auto& [key, value] : env) {
    if (!ChangesEveryGeneration(key)) continue;
    if (!first) out.push_back(',');
    first = false;
    absl::StrAppend(&out, JsonString(key), ":", JsonString(value));
  }
  absl::StrAppend(&out, "}}\n");
  return out;
}

absl::StatusOr<RecoveryChannel> RecoveryChannel::Open(std::string dir) {
  if (absl::Status s = MakeDirectories(dir); !s.ok()) return s;
  const std::string fifo = dir + "/control";
  if (mkfifo(fifo.c_str(), 0600) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("mkfifo ", fifo, ": ", strerror(errno)));
  }
  RecoveryChannel channel(std::move(dir));
  channel.Reset();
  return channel;
}

void RecoveryChannel::Reset() const { unlink((dir_ + "/state").c_str()); }

std::optional<RecoveryReport> RecoveryChannel::Read() const {
  const std::string path = dir_ + "/state";
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return std::nullopt;
  char buffer[kMaxReportBytes];
  const size_t n = std::fread(buffer, 1, sizeof(buffer), f);
  std::fclose(f);
  absl::StatusOr<RecoveryReport> report = ParseRecoveryReport(std::string(buffer, n));
  if (!report.ok()) {
    DDP_LOG(WARNING) << path << ": " << report.status();
    return std::nullopt;
  }
  return *report;
}

absl::Status RecoveryChannel::Send(const std::string& line) const {
  const std::string fifo = dir_ + "/control";
  const int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENXIO) {
      return absl::FailedPreconditionError(
          absl::StrCat(fifo, ": no worker reads it (not under ddp_coordinator.run)"));
    }
    return absl::InternalError(absl::StrCat("open ", fifo, ": ", strerror(errno)));
  }
  size_t written = 0;
  absl::Status status;
  while (written < line.size()) {
    const ssize_t n = write(fd, line.data() + written, line.size() - written);
    if (n > 0) {
      written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    status = n < 0 && errno == EAGAIN
                 ? absl::UnavailableError(absl::StrCat(fifo, ": full, the worker does not read it"))
                 : absl::InternalError(absl::StrCat("write ", fifo, ": ", strerror(errno)));
    break;
  }
  close(fd);
  return status;
}

}  // namespace ddp::client
