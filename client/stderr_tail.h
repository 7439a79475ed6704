#ifndef DDP_CLIENT_STDERR_TAIL_H_
#define DDP_CLIENT_STDERR_TAIL_H_

// The end of a worker's stderr, kept by the agent so that a failure carries
// the worker's own words to the coordinator (issue 25: "the error travels"):
//   - StderrTail keeps the last `max_lines` lines and at most `max_bytes`
//     bytes of a stream fed in arbitrary chunks (a line longer than
//     max_bytes keeps its end);
//   - values of secrets the agent knows (DDP_TOKEN and every variable of the
//     worker's environment whose name says it is a secret) are replaced by
//     "[REDACTED]" before the text leaves the agent;
//   - PythonTracebackIn finds the last Python traceback in a tail, for
//     workers that wrote no TORCHELASTIC_ERROR_FILE.
//
// Thread-safety: StderrTail is not thread-safe (one per worker stream, owned
// by the supervisor's event loop); the functions are pure.

#include <cstddef>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ddp::client {

struct StderrTailLimits {
  size_t max_lines = 64;
  size_t max_bytes = 8 << 10;
};

class StderrTail {
 public:
  explicit StderrTail(StderrTailLimits limits = {}) : limits_(limits) {}

  // Bytes as the worker wrote them.
  void Append(absl::string_view bytes);

  // The kept lines, "\n"-terminated, the unfinished last line included
  // (without a newline); at most max_lines lines and max_bytes bytes.
  std::string Text() const;

 private:
  void Trim();

  StderrTailLimits limits_;
  std::deque<std::string> lines_;  // complete lines, without their "\n"
  std::string partial_;            // the line being written
  size_t bytes_ = 0;               // sum of lines_ sizes + one "\n" each
};

// The values to hide: DDP_TOKEN's, and those of variables whose name contains
// TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL or API_KEY (any case). Values
// shorter than 4 characters are left out (hiding "1" would garble the text
// and protect nothing).
std::vector<std::string> SecretValuesIn(const std::map<std::string, std::string>& env);

// `text` with every occurrence of every value of `secrets` replaced by
// "[REDACTED]".
std::string RedactSecrets(absl::string_view text, const std::vector<std::string>& secrets);

// The last Python traceback in `text`: from its last "Traceback (most recent
// call last):" line through the exception line that ends it (the first
// line after the frames that is not indented). Chained exceptions ("During
// handling of the above exception ...") keep only the last traceback. Empty
// when there is none.
std::string PythonTracebackIn(absl::string_view text);

}  // namespace ddp::client

#endif  // DDP_CLIENT_STDERR_TAIL_H_
