#ifndef DDP_COORDINATOR_STORAGE_SQLITE_JOB_ROWS_H_
#define DDP_COORDINATOR_STORAGE_SQLITE_JOB_ROWS_H_

// How the earlier releases' jobs.db stored a JobRecord, FailureInfo and
// NodeRecord in columns (the order listed in legacy_jobs_database.cc): read
// once, to import that file (private to legacy_jobs_database).
//
// Thread-safety: plain functions over a statement the caller owns.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/storage/sqlite_database.h"

namespace ddp::rendezvous::sqlite_rows {

// uint64 values were stored as the int64 with the same bits.
uint64_t Uint64FromBits(int64_t bits);

// Reads consecutive columns from `first` of the current row; range errors are
// kept (the first one) in error().
class RowReader {
 public:
  explicit RowReader(const storage::SqliteStatement& statement, int first = 0)
      : statement_(statement), next_(first) {}
  int64_t Int64() { return statement_.ColumnInt64(next_++); }
  std::string Blob() { return statement_.ColumnBlob(next_++); }
  // An int column; a value outside int's range is an error naming `column`.
  int Int(absl::string_view column);
  // A 0/1 column.
  bool Bool(absl::string_view column);
  const std::string& error() const { return error_; }

 private:
  const storage::SqliteStatement& statement_;
  int next_;
  std::string error_;
};

// The columns of `jobs`.
// Returns "" or what is wrong with the row (for a DATA_LOSS message).
std::string ReadJobRow(RowReader& reader, JobRecord* job);

// The failure columns (of job_failures, and the root cause in jobs).
std::string ReadFailure(RowReader& reader, FailureInfo* failure);

// The columns of job_nodes after job_id.
std::string ReadNode(RowReader& reader, NodeRecord* node);

}  // namespace ddp::rendezvous::sqlite_rows

#endif  // DDP_COORDINATOR_STORAGE_SQLITE_JOB_ROWS_H_
