#ifndef DDP_COORDINATOR_STORAGE_SQLITE_STATE_STORE_H_
#define DDP_COORDINATOR_STORAGE_SQLITE_STATE_STORE_H_

// The production StateStore: one SQLite file (DATA_DIR/coordinator.db, WAL,
// synchronous=FULL) with the KV tables (sqlite_kv_backend.h) and the job
// tables (sqlite_job_tables.h) under one schema version. CommitState writes a
// batch's KV part and job changes in ONE transaction: one fsync for both.
//
// Schema: versions 1-2 are the KV tables (a file of an earlier release that
// held only them opens and gains the job tables as version 3); version 4 adds
// the job events and their counts (a version-3 file gains them empty: its jobs
// load without events, their numbering goes on).
//
// Earlier releases kept the jobs in a second file, DATA_DIR/jobs.db. Open
// imports it: ImportJobsDatabase reads every job of that file (any of its
// schema versions) and writes them in one transaction, together with a row in
// `state_imports`, after which the old file is renamed jobs.db.imported. A
// crash in between is harmless: the import row says it is done, and the next
// open only renames.
//
// Thread-safety: thread-safe (see SqliteKvBackend).

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/commit/state_store.h"
#include "coordinator/storage/sqlite_kv_backend.h"

namespace ddp::storage {

// Whether a data dir still has the jobs in a second file: `jobs_db_path`
// exists, or `state_db_path` was written by an earlier release (its schema
// predates the job tables), so a missing jobs.db is a loss, not a new dir.
// Possible errors: those of opening `state_db_path`.
absl::StatusOr<bool> ExpectsLegacyJobsDatabase(const std::string& state_db_path,
                                               const std::string& jobs_db_path);

class SqliteStateStore final : public commit::StateStore {
 public:
  // Opens (creating if needed) the database at `db_path` and brings its
  // schema up to date. Possible errors: those of SqliteKvBackend::Open.
  static absl::StatusOr<std::unique_ptr<SqliteStateStore>> Open(
      const std::string& db_path, kv::SqliteKvBackendOptions options = {});

  // The file's schema steps (KV, then jobs).
  static std::vector<SqliteMigration> SchemaMigrations();

  // Moves the jobs of a jobs.db written by an earlier release into this
  // store (see the file comment); a no-op when `jobs_db_path` does not exist.
  // Returns the number of jobs imported. Possible errors: DATA_LOSS (the old
  // file is damaged), and the stores'.
  absl::StatusOr<int> ImportJobsDatabase(const std::string& jobs_db_path);

  absl::Status CommitState(const commit::StateBatch& batch) override;
  absl::StatusOr<kv::PersistedKvState> Load() override { return kv_->Load(); }
  absl::StatusOr<std::vector<kv::Event>> ReadEvents(const std::string& ns,
                                                    const std::string& prefix,
                                                    kv::Revision from_revision,
                                                    size_t max_events) override {
    return kv_->ReadEvents(ns, prefix, from_revision, max_events);
  }
  absl::Status Compact(kv::Revision revision) override { return kv_->Compact(revision); }
  absl::StatusOr<std::vector<rendezvous::JobSnapshot>> LoadAll() const override;
  absl::StatusOr<rendezvous::JobEventCounts> LoadEventCounts() const override;
  absl::StatusOr<std::vector<v1::Node>> LoadNodes() const override;
  absl::StatusOr<std::optional<v1::QuarantinePolicy>> LoadQuarantinePolicy() const override;

 private:
  explicit SqliteStateStore(std::unique_ptr<kv::SqliteKvBackend> kv) : kv_(std::move(kv)) {}

  std::unique_ptr<kv::SqliteKvBackend> kv_;
};

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_SQLITE_STATE_STORE_H_
