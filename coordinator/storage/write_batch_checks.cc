#include "coordinator/storage/write_batch_checks.h"

#include "absl/strings/str_format.h"

namespace ddp::kv {

absl::Status CheckWriteBatch(const KvWriteBatch& batch, Revision last_revision) {
  if (batch.revision <= last_revision) {
    return absl::InvalidArgumentError(
        absl::StrFormat("write batch revision %d does not exceed the last committed revision "
                        "%d; "
                        "revisions must strictly increase (nothing was applied)",
                        batch.revision, last_revision));
  }
  Revision previous = last_revision + 1;
  for (size_t i = 0; i < batch.events.size(); ++i) {
    const Revision revision = batch.events[i].revision();
    if (revision < previous || revision > batch.revision) {
      return absl::InvalidArgumentError(
          absl::StrFormat("event #%d of the write batch has revision %d; events must be in "
                          "(%d, %d] and in non-decreasing order (nothing was applied)",
                          i, revision, last_revision, batch.revision));
    }
    previous = revision;
  }
  if (batch.next_lease_id < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "write batch next_lease_id %d is negative (0 means unchanged)", batch.next_lease_id));
  }
  return absl::OkStatus();
}

absl::Status CheckCompactRevision(Revision revision, Revision last_revision) {
  if (revision > last_revision) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot compact to revision %d: the last committed revision is %d",
                        revision, last_revision));
  }
  return absl::OkStatus();
}

absl::Status CheckReadFrom(Revision from_revision, Revision compacted_revision) {
  if (from_revision <= compacted_revision) {
    return absl::OutOfRangeError(
        absl::StrFormat("history from revision %d is gone: compacted up to revision %d; resume "
                        "from "
                        "revision %d or later after reading the current state",
                        from_revision, compacted_revision, compacted_revision + 1));
  }
  return absl::OkStatus();
}

}  // namespace ddp::kv
