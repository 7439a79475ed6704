#include "coordinator/rendezvous/rank_table.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace ddp::rendezvous {

absl::StatusOr<RankTable> ComputeRankTable(const std::vector<RankMember>& members) {
  const int n = static_cast<int>(members.size());
  if (n == 0) {
    return absl::InvalidArgumentError("a rank table needs at least one member");
  }
  absl::flat_hash_set<std::string> seen;
  seen.reserve(n);
  for (const RankMember& m : members) {
    if (!seen.insert(m.node_id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate node id '", m.node_id, "' in rank table"));
    }
    if (m.nproc < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", m.node_id, "' has process count ", m.nproc, "; need >= 1"));
    }
  }

  // How many members request each rank; -1 marks "free".
  std::vector<int> request_count(n, 0);
  for (const RankMember& m : members) {
    if (m.requested_rank >= 0 && m.requested_rank < n) {
      ++request_count[m.requested_rank];
    }
  }
  std::vector<int> owner(n, -1);  // group rank -> member index
  std::vector<int> rank_of(n, -1);
  RankTable table;
  // 1. Consistent requests.
  for (int i = 0; i < n; ++i) {
    int r = members[i].requested_rank;
    if (r < 0) continue;
    if (r < n && request_count[r] == 1) {
      owner[r] = i;
      rank_of[i] = r;
    } else {
      table.ignored_requests.push_back(members[i].node_id);
    }
  }
  // 2. Sticky previous ranks (a malformed duplicate previous rank loses).
  for (int i = 0; i < n; ++i) {
    int p = members[i].previous_group_rank;
    if (rank_of[i] >= 0 || p < 0 || p >= n || owner[p] >= 0) continue;
    owner[p] = i;
    rank_of[i] = p;
  }
  // 3. Fill the holes: previous members by previous rank, then new nodes.
  std::vector<int> rest;
  for (int i = 0; i < n; ++i) {
    if (rank_of[i] < 0) rest.push_back(i);
  }
  std::stable_sort(rest.begin(), rest.end(), [&](int a, int b) {
    int pa = members[a].previous_group_rank;
    int pb = members[b].previous_group_rank;
    if ((pa >= 0) != (pb >= 0)) return pa >= 0;
    return pa >= 0 && pa < pb;
  });
  size_t next = 0;
  for (int r = 0; r < n && next < rest.size(); ++r) {
    if (owner[r] >= 0) continue;
    owner[r] = rest[next];
    rank_of[rest[next]] = r;
    ++next;
  }

  table.entries.resize(n);
  int64_t offset = 0;
  for (int r = 0; r < n; ++r) {
    const RankMember& m = members[owner[r]];
    RankEntry& e = table.entries[r];
    e.node_id = m.node_id;
    e.group_rank = r;
    e.nproc = m.nproc;
    e.global_rank_offset = offset;
    offset += m.nproc;
  }
  table.world_size = offset;
  return table;
}

}  // namespace ddp::rendezvous
