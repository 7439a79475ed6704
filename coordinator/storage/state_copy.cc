#include "coordinator/storage/state_copy.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ddp::storage {
namespace {

// The job changes that rebuild `snapshot` in an empty store: each past run
// as it was, archived when the next run replaced it (as the rendezvous core
// does), then the current run with its nodes.
void AppendJob(const rendezvous::JobSnapshot& snapshot,
               std::vector<rendezvous::JobChanges>* changes) {
  for (const rendezvous::JobRecord& past : snapshot.past_runs) {
    rendezvous::JobChanges created;
    created.job_id = past.job_id();
    created.job = past;
    changes->push_back(std::move(created));
    rendezvous::JobChanges replaced;
    replaced.job_id = past.job_id();
    replaced.job_removed = true;
    replaced.archived_run = past;
    replaced.keep_runs_from = 0;
    changes->push_back(std::move(replaced));
  }
  rendezvous::JobChanges current;
  current.job_id = snapshot.job.job_id();
  current.job = snapshot.job;
  current.upserted_nodes = snapshot.nodes;
  current.appended_events = snapshot.events;
  changes->push_back(std::move(current));
}

}  // namespace

absl::StatusOr<StateCopySummary> CopyState(commit::StateStore& from, commit::StateStore& to) {
  DDP_ASSIGN_OR_RETURN(kv::PersistedKvState source, from.Load());
  DDP_ASSIGN_OR_RETURN(std::vector<rendezvous::JobSnapshot> jobs, from.LoadAll());
  DDP_ASSIGN_OR_RETURN(std::vector<v1::Node> fleet, from.LoadNodes());
  DDP_ASSIGN_OR_RETURN(std::optional<v1::QuarantinePolicy> policy, from.LoadQuarantinePolicy());
  DDP_ASSIGN_OR_RETURN(kv::PersistedKvState target, to.Load());
  DDP_ASSIGN_OR_RETURN(std::vector<rendezvous::JobSnapshot> target_jobs, to.LoadAll());

  StateCopySummary summary;
  summary.revision = source.revision;
  summary.keys = static_cast<int64_t>(source.keys.size());
  summary.leases = static_cast<int64_t>(source.leases.size());
  summary.jobs = static_cast<int64_t>(jobs.size());
  for (const rendezvous::JobSnapshot& job : jobs) {
    summary.past_runs += static_cast<int64_t>(job.past_runs.size());
    summary.nodes += static_cast<int64_t>(job.nodes.size());
    summary.events += static_cast<int64_t>(job.events.size());
  }

  const bool target_empty =
      target.revision == 0 && target.keys.empty() && target.leases.empty() && target_jobs.empty();
  const bool interrupted_copy = source.revision > 0 && target.revision == source.revision &&
                                target.compacted_revision < source.revision &&
                                target.keys.size() == source.keys.size() &&
                                target_jobs.size() == jobs.size();
  if (interrupted_copy) {
    DDP_RETURN_IF_ERROR(to.Compact(source.revision));
    summary.finished_earlier_copy = true;
    return summary;
  }
  if (!target_empty) {
    return absl::FailedPreconditionError(
        absl::StrCat("the target store is not empty (revision ", target.revision, ", ",
                     target.keys.size(), " keys, ", target_jobs.size(),
                     " jobs): copy into an empty store (a new etcd prefix), "
                     "or delete the prefix first; nothing was written"));
  }
  if (source.revision == 0 && jobs.empty() && fleet.empty() && !policy) {
    return summary;  // nothing to copy
  }

  commit::StateBatch batch;
  if (source.revision > 0) {  // a store that never wrote a key has no KV part
    kv::KvWriteBatch kv;
    kv.revision = source.revision;
    kv.upserts.reserve(source.keys.size());
    source.keys.ForEach([&](const kv::KeyValue& key) { kv.upserts.push_back(key); });
    kv.lease_grants = std::move(source.leases);
    kv.next_lease_id = source.next_lease_id;
    batch.kv = std::move(kv);
  }
  for (const rendezvous::JobSnapshot& job : jobs) AppendJob(job, &batch.jobs);
  batch.nodes = std::move(fleet);  // the fleet's ledger
  batch.quarantine_policy = std::move(policy);
  DDP_RETURN_IF_ERROR(to.CommitState(batch));
  // No history was copied: say so to watchers (OUT_OF_RANGE, not a gap).
  if (source.revision > 0) DDP_RETURN_IF_ERROR(to.Compact(source.revision));
  return summary;
}

}  // namespace ddp::storage
