#ifndef DDP_COORDINATOR_STORAGE_SQLITE_JOB_ROWS_H_
#define DDP_COORDINATOR_STORAGE_SQLITE_JOB_ROWS_H_

// Row codecs of SqliteJobStateStore (private to it): how a JobRecord,
// FailureInfo and NodeRecord map to the columns of the job tables, in the
// column order listed in sqlite_job_state_store.cc. Binding and reading walk
// the columns in order, so each codec is one symmetric list of fields.
//
// Thread-safety: plain functions over a statement the caller owns.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/storage/sqlite_database.h"

namespace ddp::rendezvous::sqlite_rows {

// uint64 values are stored as the int64 with the same bits.
int64_t Uint64Bits(uint64_t value);
uint64_t Uint64FromBits(int64_t bits);

// Binds consecutive parameters from `first`; keeps the first error.
class RowBinder {
 public:
  explicit RowBinder(storage::SqliteStatement& statement, int first = 1)
      : statement_(statement), next_(first) {}
  void Int(int64_t value);
  void Blob(absl::string_view bytes);
  const absl::Status& status() const { return status_; }

 private:
  storage::SqliteStatement& statement_;
  int next_;
  absl::Status status_;
};

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

// The columns of `jobs`, with `counters` in place of the record's.
absl::Status BindJobRow(const JobRecord& job, const JobCounters& counters, RowBinder& binder);
// Returns "" or what is wrong with the row (for a DATA_LOSS message).
std::string ReadJobRow(RowReader& reader, JobRecord* job);

// The failure columns (of job_failures, and the root cause in jobs).
void BindFailure(const FailureInfo& failure, RowBinder& binder);
std::string ReadFailure(RowReader& reader, FailureInfo* failure);

// The columns of job_nodes after job_id.
absl::Status BindNode(const NodeRecord& node, RowBinder& binder);
std::string ReadNode(RowReader& reader, NodeRecord* node);

}  // namespace ddp::rendezvous::sqlite_rows

#endif  // DDP_COORDINATOR_STORAGE_SQLITE_JOB_ROWS_H_
