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
  if (!leader_hint.empty() && leader_hint != current()) {
    hinted_ = std::string(leader_hint);
    return true;
  }
  if (hinted_) {
    hinted_.reset();  // the named leader failed too: back to the list
  } else {
    index_ = (index_ + 1) % endpoints_.size();
  }
  return false;
}

std::string LeaderHint(const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find("ddp-leader");
  if (it == trailers.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

}  // namespace ddp
