#ifndef DDP_COORDINATOR_HTTP_PATH_TEMPLATE_H_
#define DDP_COORDINATOR_HTTP_PATH_TEMPLATE_H_

// A REST path template in grpc-gateway's notation, and matching request paths
// against it:
//   /v1/jobs/{job_id}:cancel       literal segments, one-segment variables,
//   /v1/kv/{namespace}/{key=**}    a last variable that takes the rest of the
//                                  path (slashes included),
// and an optional ":verb" after the last segment. Captured values are
// percent-decoded.

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddp::http {

class PathTemplate {
 public:
  // INVALID_ARGUMENT for a malformed template (names the template and why).
  static absl::StatusOr<PathTemplate> Parse(absl::string_view pattern);

  // The variables of `path` (without query string) in template order, or
  // false when it does not match. A variable never matches an empty segment.
  bool Match(absl::string_view path, std::vector<std::pair<std::string, std::string>>* vars) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Segment {
    std::string literal;   // when variable is empty
    std::string variable;  // field path the value goes to
    bool rest = false;     // {name=**}
  };
  std::string pattern_;
  std::vector<Segment> segments_;
  std::string verb_;
};

// Percent-decodes a URL path segment or query value ('+' stays '+').
// INVALID_ARGUMENT for a malformed escape.
absl::StatusOr<std::string> PercentDecode(absl::string_view encoded);

}  // namespace ddp::http

#endif  // DDP_COORDINATOR_HTTP_PATH_TEMPLATE_H_
