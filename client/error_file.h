#ifndef DDP_CLIENT_ERROR_FILE_H_
#define DDP_CLIENT_ERROR_FILE_H_

// Reads the TORCHELASTIC_ERROR_FILE a worker wrote. torch's @record writes
//   {"message": {"message": "RuntimeError: boom",
//                "extraInfo": {"py_callstack": "Traceback ...", "timestamp":
//                "1700000000"}}}
// and older versions / hand-written files {"message": "text"}. Both are
// understood; anything else that is not empty is reported as its first
// characters, so a failure never loses it. Reading is size-capped, and so is
// each returned field.
//
// Thread-safety: pure functions.

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ddp::client {

struct ErrorFileContent {
  std::string message;    // e.g. "RuntimeError: boom"
  std::string traceback;  // extraInfo.py_callstack, may be empty
  std::string timestamp;  // extraInfo.timestamp (unix seconds as text), may be empty
};

struct ErrorFileLimits {
  size_t max_file_bytes = 1 << 20;    // bytes read from the file
  size_t max_field_chars = 16 << 10;  // each returned field is cut to this
};

// Parses the text of an error file. nullopt when it is empty or whitespace.
std::optional<ErrorFileContent> ParseErrorFile(absl::string_view text,
                                               const ErrorFileLimits& limits = {});

// extraInfo.timestamp as a time: Unix seconds, as torch writes them
// (str(int(time.time())), whole seconds) or with a fraction ("1700000000.25").
struct ErrorTimestamp {
  absl::Time time;
  bool whole_seconds = true;  // no fraction: the moment lies in [time, +1 s)
};
// nullopt when `text` is empty or not a positive number of seconds.
std::optional<ErrorTimestamp> ParseErrorTimestamp(absl::string_view text);

// Reads and parses `path`. Possible errors: NOT_FOUND (no file: the worker
// wrote none), INTERNAL (unreadable; errno text named).
absl::StatusOr<ErrorFileContent> ReadErrorFile(const std::string& path,
                                               const ErrorFileLimits& limits = {});

}  // namespace ddp::client

#endif  // DDP_CLIENT_ERROR_FILE_H_
