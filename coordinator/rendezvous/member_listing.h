#ifndef DDP_COORDINATOR_RENDEZVOUS_MEMBER_LISTING_H_
#define DDP_COORDINATOR_RENDEZVOUS_MEMBER_LISTING_H_

// How the API lists a job's nodes (ddp.v1.Job members and spares): Job::Status
// builds one ddp.v1.Member per registered node and ListMembers places them.
//
// Thread-safety: pure functions.

#include <vector>

#include "absl/time/time.h"
#include "coordinator/rendezvous/job_types.h"
#include "ddp/v1/jobs.pb.h"

namespace ddp::rendezvous {

// A worker's latest progress as the API shows it, global_rank -1 (ListMembers
// sets a member's). This one deliberately differs from what the core keeps:
// the core keeps when the report was made (WorkerProgress::reported, its
// checkpoint as a time), the API shows its age at `now` (never negative) and
// Unix milliseconds.
v1::WorkerProgress ProgressToApi(const WorkerProgress& progress, absl::Time now);

// Places `nodes` (every registered node, group_rank -1 when it is no member of
// the current generation) into job->members, sorted by group rank, and
// job->spares, in the given order. A finished job has no spares: nothing is
// left to replace; the nodes still registered when it finished are its last
// generation's members (the core no longer reports their ranks then: group
// rank -1), listed as members so that a finished job does not read as "no
// members, two spares". A member's global_rank_offset (and its workers'
// global ranks) is the prefix sum of the members' process counts in
// group-rank order (the rank table's rule) when the members form ranks
// 0..n-1 without a gap, -1 otherwise (a member left and the next generation is
// not formed yet).
void ListMembers(bool finished, std::vector<v1::Member> nodes, v1::Job* job);

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_MEMBER_LISTING_H_
