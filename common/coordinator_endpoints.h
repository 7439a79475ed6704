#ifndef DDP_COMMON_COORDINATOR_ENDPOINTS_H_
#define DDP_COMMON_COORDINATOR_ENDPOINTS_H_

// Which coordinator a client calls next, when it was given several (an HA
// deployment: --coordinator a:29400,b:29400,c:29400). A standby ends every
// call with UNAVAILABLE and names the leader in the trailing metadata
// "ddp-leader"; the client goes there at once. Without a hint (the
// coordinator is down, or no leader is elected yet) it tries the next one in
// the list.
//
// Thread-safety: not thread-safe (one per caller).

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "grpcpp/client_context.h"

namespace ddp {

class CoordinatorEndpoints {
 public:
  // `endpoints` must not be empty (ParseEndpointList).
  explicit CoordinatorEndpoints(std::vector<std::string> endpoints);

  const std::string& current() const { return hinted_ ? *hinted_ : endpoints_[index_]; }
  const std::vector<std::string>& all() const { return endpoints_; }
  // "a:1,b:2", for messages.
  std::string Joined() const;
  // After a call to current() failed: to `leader_hint` when it names another
  // coordinator (returns true: worth calling at once), else to the next in
  // the list (returns false). A named leader that failed is not followed
  // again until the list went round once, and the list goes on after the
  // coordinator that named it: a standby that names the leader by an address
  // this client cannot reach (its --advertise-host seen from another
  // network) must not send it back and forth between the two.
  bool Next(absl::string_view leader_hint);

 private:
  std::vector<std::string> endpoints_;
  size_t index_ = 0;
  std::optional<std::string> hinted_;  // a leader named by a standby
  std::string failed_hint_;            // a named leader that failed, this round
};

// The leader a standby named in the trailing metadata of a finished call;
// empty when none.
std::string LeaderHint(const grpc::ClientContext& context);

}  // namespace ddp

#endif  // DDP_COMMON_COORDINATOR_ENDPOINTS_H_
