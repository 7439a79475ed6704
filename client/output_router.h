#ifndef DDP_CLIENT_OUTPUT_ROUTER_H_
#define DDP_CLIENT_OUTPUT_ROUTER_H_

// Routes one worker stream (stdout or stderr, read from a pipe) per torchrun's
// rules:
//   redirected -> log file only;  teed -> log file and console;  neither ->
//   console only.
// Console output is split into lines, each prefixed with the worker's global
// rank
// ("[rank3]: ..."), and dropped for local ranks outside --local-ranks-filter.
// Files receive the bytes unchanged. A line longer than `max_line_bytes` is
// emitted in pieces so memory stays bounded. Writes to the console are whole
// lines (one write each), so lines of different workers do not interleave
// mid-line.
//
// Thread-safety: not thread-safe; each instance is owned by the supervisor's
// event loop.

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ddp::client {

class OutputRouter {
 public:
  struct Options {
    std::string file_path;  // empty: no file
    int console_fd = -1;    // -1: not shown on the console
    std::string prefix;     // e.g. "[rank3]: "
    size_t max_line_bytes = 64 << 10;
    // true: the console gets the bytes unchanged as they come (no lines, no
    // prefix, no filter): the worker's own console stream, read through the
    // agent only to keep its tail.
    bool passthrough = false;
  };
  explicit OutputRouter(Options options) : options_(std::move(options)) {}
  ~OutputRouter();
  OutputRouter(const OutputRouter&) = delete;
  OutputRouter& operator=(const OutputRouter&) = delete;

  // Opens (creates/truncates) the log file. Possible errors: INTERNAL (path,
  // errno text).
  absl::Status Open();
  // Handles bytes read from the worker's pipe.
  void Write(absl::string_view bytes);
  // End of stream: emits a pending partial line.
  void Flush();

 private:
  void EmitLine(absl::string_view line);

  Options options_;
  int file_fd_ = -1;
  std::string partial_;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_OUTPUT_ROUTER_H_
