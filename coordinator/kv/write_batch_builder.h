#ifndef DDP_COORDINATOR_KV_WRITE_BATCH_BUILDER_H_
#define DDP_COORDINATOR_KV_WRITE_BATCH_BUILDER_H_

// Evaluates the writes of one group commit, in order, against the committed
// state plus the earlier writes of the same batch (an overlay), and produces
// the KvWriteBatch to persist. Nothing is changed until the batch is durable;
// then ApplyTo moves the overlay into the committed state.
//
// Each successful write that changes something gets its own revision (one more
// than the previous one); writes that fail or change nothing (delete of a
// missing key, a CAS that does not swap) take no revision.
//
// Each change is held once, as its event: the overlay maps a key to the index
// of its latest event in the batch, and the write's strings are moved into
// that event (Apply(WriteOp&&)). Build hands the events to the batch without a
// copy; ApplyTo moves the committed upserts into the KeySpace.
//
// Use: Apply...; Build (once; no Apply after it); Commit; ApplyTo.
//
// Thread-safety: not thread-safe; used by the committer thread alone, which
// holds the state mutex (shared) while evaluating and (exclusive) while
// applying.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/kv/key_space.h"
#include "coordinator/kv/kv_backend.h"
#include "coordinator/kv/kv_ops.h"
#include "coordinator/kv/kv_types.h"
#include "coordinator/kv/lease_ownership.h"
#include "coordinator/kv/lease_table.h"

namespace ddp::kv {

struct LeaseGrantOp {
  int64_t ttl_ms = 0;
  std::string owner;  // the namespace it belongs to; "": none
};
struct LeaseRevokeOp {
  LeaseId lease = 0;
  bool expired = false;  // internal: issued by lease expiry; a missing lease is a no-op
  LeaseCaller caller;    // PERMISSION_DENIED for another job's lease
};

// One queued write. Inputs are already validated (kv_validation).
using WriteOp = std::variant<PutRequest, DeleteRequest, CompareAndSetRequest, AddRequest,
                             LeaseGrantOp, LeaseRevokeOp>;

// The result of one write; each operation fills the fields its reply needs.
struct WriteOutcome {
  Revision revision = 0;
  std::optional<KeyValue> previous;  // Put with return_previous
  int64_t deleted = 0;               // Delete, LeaseRevoke
  std::string value;                 // CompareAndSet
  bool swapped = false;              // CompareAndSet
  int64_t number = 0;                // Add
  LeaseId lease = 0;                 // LeaseGrant
  int64_t ttl_ms = 0;                // LeaseGrant
};

class WriteBatchBuilder {
 public:
  // `keys` and `leases` are the committed state; they must not change while the
  // builder is in use (only the committer changes them). New lease ids come
  // from `new_lease_id` (drawn again while one is taken; it must outlive the
  // builder).
  // `expected_writes`: about how many writes the batch will have (sizes the
  // builder's tables once instead of growing them write by write).
  WriteBatchBuilder(const KeySpace& keys, const LeaseTable& leases, Revision revision,
                    const LeaseIdSource& new_lease_id, size_t max_leases,
                    size_t expected_writes = 0);

  // Errors (the write is skipped, the batch goes on): FAILED_PRECONDITION (put
  // condition), NOT_FOUND (unknown lease), PERMISSION_DENIED (another job's
  // lease), INVALID_ARGUMENT (Add on a non-integer), OUT_OF_RANGE (Add
  // overflow), RESOURCE_EXHAUSTED (too many leases), INTERNAL (the id source
  // gave only ids in use).
  // A grant with an owner also writes the lease's owner key
  // (lease_ownership.h), at the grant's revision.
  // The rvalue form takes the write's strings instead of copying them.
  absl::StatusOr<WriteOutcome> Apply(WriteOp&& op);
  absl::StatusOr<WriteOutcome> Apply(const WriteOp& op);

  // True when no write of the batch changed anything (nothing to commit).
  bool empty() const { return revision_ == base_revision_; }
  Revision revision() const { return revision_; }

  // The batch to persist; its events are moved out of the builder.
  KvWriteBatch Build();
  // Moves the committed batch (from Build, after Commit returned OK) into the
  // committed state; takes `committed.upserts`.
  void ApplyTo(KvWriteBatch& committed, KeySpace& keys, LeaseTable& leases, absl::Time now) const;

 private:
  using KeyRef = std::pair<std::string, std::string>;

  const KeyValue* Lookup(const std::string& ns, const std::string& key) const;
  bool LeaseExists(LeaseId id) const;
  // The owner of an existing lease (granted in this batch or committed).
  const std::string& LeaseOwner(LeaseId id) const;
  void SetKey(KeyValue kv);
  void DeleteKey(const std::string& ns, const std::string& key, Revision revision);
  // Writes `value` to (ns, key), keeping the existing create revision and
  // lease.
  Revision WriteValue(const std::string& ns, const std::string& key, std::string value,
                      const KeyValue* current);

  absl::StatusOr<WriteOutcome> ApplyPut(PutRequest& op);
  absl::StatusOr<WriteOutcome> ApplyDelete(const DeleteRequest& op);
  absl::StatusOr<WriteOutcome> ApplyCompareAndSet(const CompareAndSetRequest& op);
  absl::StatusOr<WriteOutcome> ApplyAdd(const AddRequest& op);
  absl::StatusOr<WriteOutcome> ApplyLeaseGrant(const LeaseGrantOp& op);
  absl::StatusOr<WriteOutcome> ApplyLeaseRevoke(const LeaseRevokeOp& op);

  const KeySpace& keys_;
  const LeaseTable& leases_;
  const Revision base_revision_;
  const LeaseIdSource& new_lease_id_;
  const size_t max_leases_;
  Revision revision_;
  // Key -> index in events_ of its latest event (a put, or a delete).
  absl::flat_hash_map<KeyRef, size_t> overlay_;
  struct Granted {
    int64_t ttl_ms = 0;
    std::string owner;
  };
  absl::flat_hash_map<LeaseId, Granted> granted_;
  absl::flat_hash_set<LeaseId> revoked_;  // committed leases revoked here
  std::vector<Event> events_;
  bool built_ = false;  // events_ moved out by Build
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_KV_WRITE_BATCH_BUILDER_H_
