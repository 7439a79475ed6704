#include "client/output_router.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace ddp::client {
namespace {

void WriteAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed console or a full disk must not stop the agent
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

OutputRouter::~OutputRouter() {
  Flush();
  if (file_fd_ >= 0) close(file_fd_);
}

absl::Status OutputRouter::Open() {
  if (options_.file_path.empty()) return absl::OkStatus();
  file_fd_ = open(options_.file_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (file_fd_ < 0) {
    return absl::InternalError(
        absl::StrCat("cannot open log file ", options_.file_path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

void OutputRouter::Write(absl::string_view bytes) {
  if (file_fd_ >= 0) WriteAll(file_fd_, bytes);
  if (options_.console_fd < 0) return;
  if (options_.passthrough) {
    WriteAll(options_.console_fd, bytes);
    return;
  }
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    if (newline == absl::string_view::npos) {
      partial_.append(bytes.data(), bytes.size());
      while (partial_.size() >= options_.max_line_bytes) {
        EmitLine(absl::string_view(partial_).substr(0, options_.max_line_bytes));
        partial_.erase(0, options_.max_line_bytes);
      }
      return;
    }
    if (partial_.empty()) {
      EmitLine(bytes.substr(0, newline));
    } else {
      partial_.append(bytes.data(), newline);
      EmitLine(partial_);
      partial_.clear();
    }
    bytes.remove_prefix(newline + 1);
  }
}

void OutputRouter::Flush() {
  if (!partial_.empty() && options_.console_fd >= 0) EmitLine(partial_);
  partial_.clear();
}

void OutputRouter::EmitLine(absl::string_view line) {
  WriteAll(options_.console_fd, absl::StrCat(options_.prefix, line, "\n"));
}

}  // namespace ddp::client
