#ifndef DDP_COORDINATOR_STORAGE_WRITE_BATCH_CHECKS_H_
#define DDP_COORDINATOR_STORAGE_WRITE_BATCH_CHECKS_H_

// Checks shared by every KvBackend, so all of them reject the same batches with
// the same codes before anything is applied.

#include "absl/status/status.h"
#include "coordinator/kv/kv_backend.h"

namespace ddp::kv {

// OK when `batch` may follow a store whose last committed revision is
// `last_revision`: batch.revision > last_revision, every event's revision lies
// in (last_revision, batch.revision] and never decreases, next_lease_id >= 0.
// Possible errors: INVALID_ARGUMENT naming the offending value.
absl::Status CheckWriteBatch(const KvWriteBatch& batch, Revision last_revision);

// OK when `revision` may be passed to Compact on a store at `last_revision`.
// Possible errors: INVALID_ARGUMENT if revision > last_revision.
absl::Status CheckCompactRevision(Revision revision, Revision last_revision);

// OK when `from_revision` is still readable: from_revision >
// compacted_revision. Possible errors: OUT_OF_RANGE naming both revisions.
absl::Status CheckReadFrom(Revision from_revision, Revision compacted_revision);

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_STORAGE_WRITE_BATCH_CHECKS_H_
