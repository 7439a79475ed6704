#include "coordinator/rendezvous/rendezvous_round.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp::rendezvous {

RendezvousRound::RendezvousRound(Generation generation, MasterInfo master)
    : generation_(generation), master_(std::move(master)) {}

absl::Status RendezvousRound::RestoreMembers(const std::vector<std::pair<std::string, int>>& ranks,
                                             int64_t world_size, const std::string& job_id) {
  int max_rank = -1;
  for (const auto& [id, rank] : ranks) max_rank = std::max(max_rank, rank);
  members_.by_rank.assign(max_rank + 1, "");
  for (const auto& [id, rank] : ranks) {
    if (rank < 0) continue;
    if (!members_.by_rank[rank].empty()) {
      return absl::DataLossError(
          absl::StrCat("stored job '", Capped(job_id), "' has two nodes with group rank ", rank));
    }
    members_.by_rank[rank] = id;
    ++members_.live;
  }
  members_.world_size = world_size;
  return absl::OkStatus();
}

void RendezvousRound::Open(absl::Time join_deadline) {
  members_.Clear();
  master_deadline_ = absl::InfiniteFuture();
  join_deadline_ = join_deadline;
  min_reached_at_.reset();
}

bool RendezvousRound::ReadyToClose(int registered, const JobSettings& settings, absl::Time now) {
  if (registered >= settings.max_nodes()) return true;
  if (registered >= settings.min_nodes() && !min_reached_at_) {
    min_reached_at_ = now;
    return LastCallTimeout(settings) == absl::ZeroDuration();
  }
  return false;
}

absl::StatusOr<RankTable> RendezvousRound::Close(const std::vector<RankMember>& members,
                                                 absl::Time master_deadline) {
  absl::StatusOr<RankTable> table = ComputeRankTable(members);
  if (!table.ok()) return table.status();
  ++generation_;
  members_.Form(members.size(), table->world_size);
  for (const RankEntry& e : table->entries) members_.by_rank[e.group_rank] = e.node_id;
  master_ = MasterInfo();
  min_reached_at_.reset();
  join_deadline_ = absl::InfiniteFuture();
  master_deadline_ = master_deadline;
  return table;
}

absl::StatusOr<MasterInfo> RendezvousRound::EffectiveMasterInfo(
    const MasterInfo& info, const std::string& node_id, const std::string& registered_address,
    int max_address_length) {
  if (info.master_port() < 1 || info.master_port() > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("master port ", info.master_port(), " is outside [1, 65535]"));
  }
  // Empty: NCCL is not installed on the rank-0 node; workers get no id.
  if (!info.nccl_unique_id().empty() && info.nccl_unique_id().size() != kNcclUniqueIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL unique id is ", info.nccl_unique_id().size(), " bytes; it must be ",
                     kNcclUniqueIdBytes, " (ncclUniqueId) or empty (no NCCL on the node)"));
  }
  if (static_cast<int>(info.master_addr().size()) > max_address_length) {
    return absl::InvalidArgumentError(absl::StrCat("master address '", Capped(info.master_addr()),
                                                   "' is longer than ", max_address_length,
                                                   " bytes"));
  }
  MasterInfo effective = info;
  if (effective.master_addr().empty()) effective.set_master_addr(registered_address);
  if (effective.master_addr().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", node_id, "' gave no master address and registered none"));
  }
  return effective;
}

void RendezvousRound::Start(MasterInfo master, const std::vector<MemberRole>& roles) {
  master_ = std::move(master);
  ComputeRoleRanks(roles);
  master_deadline_ = absl::InfiniteFuture();
}

void RendezvousRound::ComputeRoleRanks(const std::vector<MemberRole>& roles) {
  members_.role_ranks.clear();
  absl::flat_hash_map<std::string, int64_t> next_offset;  // by role
  for (const MemberRole& member : roles) {
    if (member.role.empty()) {  // not known (restored, not resumed yet)
      members_.role_ranks.clear();
      return;
    }
    members_.role_ranks[member.node_id].first = next_offset[member.role];
    next_offset[member.role] += member.nproc;
  }
  // One role (the usual case): role ranks are the global ranks, which the
  // assignment carries anyway; leaving them out keeps an assignment resent
  // after a coordinator restart (roles are not stored) identical.
  if (next_offset.size() <= 1) {
    members_.role_ranks.clear();
    return;
  }
  for (const MemberRole& member : roles) {
    members_.role_ranks[member.node_id].second = next_offset[member.role];
  }
}

Assignment RendezvousRound::AssignmentFor(const NodeRecord& record, int restart_count,
                                          int max_restarts) const {
  Assignment a;
  a.generation = generation_;
  a.restart_count = restart_count;
  a.max_restarts = max_restarts;
  a.group_rank = record.group_rank();
  a.group_world_size = static_cast<int>(members_.by_rank.size());
  a.global_rank_offset = record.global_rank_offset();
  a.local_world_size = record.nproc();
  a.world_size = members_.world_size;
  a.master_addr = master_.master_addr();
  a.master_port = master_.master_port();
  a.nccl_unique_id = master_.nccl_unique_id();
  if (auto role = members_.role_ranks.find(record.node_id()); role != members_.role_ranks.end()) {
    a.role_rank_offset = role->second.first;
    a.role_world_size = role->second.second;
  }
  return a;
}

void RendezvousRound::Finish() {
  join_deadline_ = master_deadline_ = absl::InfiniteFuture();
  min_reached_at_.reset();
}

void RendezvousRound::Postpone(absl::Duration gap) {
  auto postpone = [gap](absl::Time& deadline) {
    if (deadline != absl::InfiniteFuture()) deadline += gap;
  };
  postpone(join_deadline_);
  postpone(master_deadline_);
  if (min_reached_at_) *min_reached_at_ += gap;
}

}  // namespace ddp::rendezvous
