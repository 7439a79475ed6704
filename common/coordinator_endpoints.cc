#include "common/coordinator_endpoints.h"

#include <utility>

#include "absl/strings/str_join.h"

namespace ddp {

CoordinatorEndpoints::CoordinatorEndpoints(std::vector<std::string> endpoints)
    : endpoints_(std::move(endpoints)) {
  if (endpoints_.empty()) endpoints_.push_back("localhost:29400");
}

std::string CoordinatorEndpoints::Joined() const { return absl::StrJoin(endpoints_, ","); }

bool CoordinatorEndpoints::Next(absl::string_view leader_hint) {
  if (!leader_hint.empty() && leader_hint != current() && leader_hint != failed_hint_) {
    hinted_ = std::string(leader_hint);
    return true;
  }
  if (hinted_) {
    // The named leader failed too: it is down, or not reachable by the name
    // it advertises from here (another network). Not followed again this
    // round, and the list goes on after the coordinator that named it (going
    // back there would only hear the same name again).
    failed_hint_ = *std::move(hinted_);
    hinted_.reset();
  }
  index_ = (index_ + 1) % endpoints_.size();
  if (index_ == 0) failed_hint_.clear();  // a new round trusts names again
  return false;
}

std::string LeaderHint(const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find("ddp-leader");
  if (it == trailers.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

}  // namespace ddp
