#include "coordinator/rendezvous/member_listing.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace ddp::rendezvous {
namespace {

int64_t ToUnixMs(absl::Time t) {
  if (t == absl::Time() || t == absl::InfinitePast()) return 0;
  return absl::ToUnixMillis(t);
}

}  // namespace

v1::WorkerProgress ProgressToApi(const WorkerProgress& p, absl::Time now) {
  v1::WorkerProgress out;
  out.set_local_rank(p.local_rank);
  out.set_global_rank(-1);
  out.set_generation(p.generation);
  out.set_step(p.step);
  out.set_steps_per_second(p.steps_per_second);
  out.set_age_ms(std::max<int64_t>(0, absl::ToInt64Milliseconds(now - p.reported)));
  out.set_relative_speed(p.relative_speed);
  out.set_straggler(p.straggler);
  out.set_speed_source(p.speed_source);
  out.set_cpu_busy(p.cpu_busy);
  for (const auto& [name, value] : p.metrics) (*out.mutable_metrics())[name] = value;
  if (p.checkpoint) {
    out.set_checkpoint_unix_ms(ToUnixMs(*p.checkpoint));
    out.set_checkpoint_step(p.checkpoint_step);
  }
  return out;
}

void ListMembers(bool finished, std::vector<v1::Member> nodes, v1::Job* job) {
  std::vector<v1::Member*> members;
  std::vector<v1::Member*> spares;
  for (v1::Member& n : nodes) {
    (finished || n.group_rank() >= 0 ? members : spares).push_back(&n);
  }
  std::stable_sort(members.begin(), members.end(),
                   [](const auto* a, const auto* b) { return a->group_rank() < b->group_rank(); });
  bool contiguous = true;
  for (size_t i = 0; i < members.size(); ++i) {
    contiguous = contiguous && members[i]->group_rank() == static_cast<int>(i);
  }
  int64_t offset = 0;
  for (v1::Member* m : members) {
    m->set_global_rank_offset(contiguous ? offset : -1);
    for (v1::WorkerProgress& p : *m->mutable_progress()) {
      p.set_global_rank(contiguous ? offset + p.local_rank() : -1);
    }
    offset += m->nproc();
    *job->add_members() = std::move(*m);
  }
  for (v1::Member* n : spares) *job->add_spares() = std::move(*n);
}

}  // namespace ddp::rendezvous
