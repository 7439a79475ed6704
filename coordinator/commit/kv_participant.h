#ifndef DDP_COORDINATOR_COMMIT_KV_PARTICIPANT_H_
#define DDP_COORDINATOR_COMMIT_KV_PARTICIPANT_H_

// Joins a kv::KvStore to the commit loop: the store's writes become the KV part
// of the loop's batches (one transaction with the job changes). The KV package
// knows only kv::KvCommitPipeline, so the KV core does not depend on the commit
// loop or on the job types the loop's StateBatch carries; this adapter, a
// layer above both, connects them.

#include <memory>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/commit/commit_loop.h"
#include "coordinator/kv/kv_store.h"

namespace ddp::commit {

// Loads the KV state of loop.store() and joins the store to `loop` (not
// started yet). The loop keeps the adapter; the store must outlive the loop's
// threads (Shutdown the store, then the loop, as the coordinator does).
// Errors: those of KvBackend::Load.
absl::StatusOr<std::unique_ptr<kv::KvStore>> OpenKvStore(CommitLoop& loop, const Clock& clock,
                                                         kv::KvStoreOptions options);

}  // namespace ddp::commit

#endif  // DDP_COORDINATOR_COMMIT_KV_PARTICIPANT_H_
