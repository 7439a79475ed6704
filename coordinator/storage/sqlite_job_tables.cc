#include "coordinator/storage/sqlite_job_tables.h"

#include <functional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/storage/job_record_codec.h"

namespace ddp::storage {

using rendezvous::JobChanges;
using rendezvous::JobCounters;
using rendezvous::JobRecord;
using rendezvous::JobSnapshot;
using rendezvous::NodeRecord;

const char kJobTablesSchema[] = R"sql(
CREATE TABLE jobs (
  job_id BLOB PRIMARY KEY,
  record BLOB NOT NULL,
  last_event_index INTEGER NOT NULL,
  next_join_seq INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE job_nodes (
  job_id BLOB NOT NULL,
  node_id BLOB NOT NULL,
  record BLOB NOT NULL,
  PRIMARY KEY (job_id, node_id)) WITHOUT ROWID;
CREATE TABLE job_runs (
  job_id BLOB NOT NULL,
  run INTEGER NOT NULL,
  record BLOB NOT NULL,
  last_event_index INTEGER NOT NULL,
  next_join_seq INTEGER NOT NULL,
  PRIMARY KEY (job_id, run)) WITHOUT ROWID;
)sql";

const char kJobEventTablesSchema[] = R"sql(
CREATE TABLE job_events (
  job_id BLOB NOT NULL,
  event_index INTEGER NOT NULL,
  record BLOB NOT NULL,
  PRIMARY KEY (job_id, event_index)) WITHOUT ROWID;
CREATE TABLE job_event_counts (
  type INTEGER NOT NULL,
  cause INTEGER NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (type, cause)) WITHOUT ROWID;
)sql";

namespace {

constexpr char kInsertEvent[] =
    "INSERT OR REPLACE INTO job_events (job_id, event_index, record) VALUES (?1, ?2, ?3)";
constexpr char kDeleteOldEvents[] = "DELETE FROM job_events WHERE job_id = ?1 AND event_index < ?2";
constexpr char kDeleteJobEvents[] = "DELETE FROM job_events WHERE job_id = ?1";
constexpr char kAddEventCount[] =
    "INSERT INTO job_event_counts (type, cause, count) VALUES (?1, ?2, ?3) "
    "ON CONFLICT (type, cause) DO UPDATE SET count = count + excluded.count";
constexpr char kUpsertJob[] =
    "INSERT INTO jobs (job_id, record, last_event_index, next_join_seq) VALUES (?1, ?2, ?3, ?4) "
    "ON CONFLICT (job_id) DO UPDATE SET record = excluded.record, "
    "last_event_index = excluded.last_event_index, next_join_seq = excluded.next_join_seq";
constexpr char kUpdateCounters[] =
    "UPDATE jobs SET last_event_index = ?2, next_join_seq = ?3 WHERE job_id = ?1";
constexpr char kSelectJobExists[] = "SELECT 1 FROM jobs WHERE job_id = ?1";
constexpr char kDeleteJob[] = "DELETE FROM jobs WHERE job_id = ?1";
constexpr char kDeleteJobNodes[] = "DELETE FROM job_nodes WHERE job_id = ?1";
constexpr char kDeleteJobRuns[] = "DELETE FROM job_runs WHERE job_id = ?1";
constexpr char kDeleteOldRuns[] = "DELETE FROM job_runs WHERE job_id = ?1 AND run < ?2";
constexpr char kInsertRun[] =
    "INSERT OR REPLACE INTO job_runs (job_id, run, record, last_event_index, next_join_seq) "
    "VALUES (?1, ?2, ?3, ?4, ?5)";
constexpr char kUpsertNode[] =
    "INSERT OR REPLACE INTO job_nodes (job_id, node_id, record) VALUES (?1, ?2, ?3)";
constexpr char kDeleteNode[] = "DELETE FROM job_nodes WHERE job_id = ?1 AND node_id = ?2";

// uint64 counters are stored as the int64 with the same bits.
int64_t Bits(uint64_t value) { return static_cast<int64_t>(value); }

// A job id for a message: hex-escaped and capped.
std::string Printable(const std::string& id) {
  std::string out = absl::CHexEscape(id.substr(0, 64));
  if (id.size() > 64) absl::StrAppend(&out, "...(", id.size(), " bytes)");
  return out;
}

// Runs a cached statement with `bind` filling its parameters.
template <typename Bind>
absl::Status RunCached(SqliteDatabase& db, const char* sql, Bind bind) {
  DDP_ASSIGN_OR_RETURN(SqliteStatement * statement, db.PrepareCached(sql));
  DDP_RETURN_IF_ERROR(bind(*statement));
  return statement->Run();
}

absl::Status WriteJob(SqliteDatabase& db, const JobRecord& job, const JobCounters& counters) {
  const std::string record = EncodeJobRecord(job);
  return RunCached(db, kUpsertJob, [&](SqliteStatement& s) {
    DDP_RETURN_IF_ERROR(s.BindBlob(1, job.job_id()));
    DDP_RETURN_IF_ERROR(s.BindBlob(2, record));
    DDP_RETURN_IF_ERROR(s.BindInt64(3, counters.last_event_index));
    return s.BindInt64(4, Bits(counters.next_join_seq));
  });
}

absl::StatusOr<bool> JobExists(SqliteDatabase& db, const std::string& job_id) {
  DDP_ASSIGN_OR_RETURN(SqliteStatement * select, db.PrepareCached(kSelectJobExists));
  DDP_RETURN_IF_ERROR(select->BindBlob(1, job_id));
  absl::StatusOr<bool> row = select->Step();
  select->Reset();
  return row;
}

absl::Status RemoveJob(SqliteDatabase& db, const JobChanges& changes) {
  auto by_job = [&](SqliteStatement& s) { return s.BindBlob(1, changes.job_id); };
  DDP_RETURN_IF_ERROR(RunCached(db, kDeleteJobEvents, by_job));
  DDP_RETURN_IF_ERROR(RunCached(db, kDeleteJobNodes, by_job));
  DDP_RETURN_IF_ERROR(RunCached(db, kDeleteJob, by_job));
  if (!changes.archived_run) return RunCached(db, kDeleteJobRuns, by_job);  // DeleteJob
  DDP_RETURN_IF_ERROR(RunCached(db, kDeleteOldRuns, [&](SqliteStatement& s) {
    DDP_RETURN_IF_ERROR(s.BindBlob(1, changes.job_id));
    return s.BindInt64(2, changes.keep_runs_from);
  }));
  rendezvous::JobRecord run = *changes.archived_run;
  run.set_job_id(changes.job_id);
  return WritePastRun(db, run);
}

absl::Status WriteNodes(SqliteDatabase& db, const JobChanges& changes) {
  // Removals first: a batch that removes and re-adds a node ends with the node.
  for (const std::string& node_id : changes.removed_nodes) {
    DDP_RETURN_IF_ERROR(RunCached(db, kDeleteNode, [&](SqliteStatement& s) {
      DDP_RETURN_IF_ERROR(s.BindBlob(1, changes.job_id));
      return s.BindBlob(2, node_id);
    }));
  }
  for (const NodeRecord& node : changes.upserted_nodes) {
    const std::string record = EncodeNodeRecord(node);
    DDP_RETURN_IF_ERROR(RunCached(db, kUpsertNode, [&](SqliteStatement& s) {
      DDP_RETURN_IF_ERROR(s.BindBlob(1, changes.job_id));
      DDP_RETURN_IF_ERROR(s.BindBlob(2, node.node_id()));
      return s.BindBlob(3, record);
    }));
  }
  return absl::OkStatus();
}

// One row per new event; then the events the core no longer retains go.
absl::Status WriteEvents(SqliteDatabase& db, const JobChanges& changes) {
  for (const rendezvous::JobEvent& event : changes.appended_events) {
    const std::string record = EncodeJobEvent(event);
    DDP_RETURN_IF_ERROR(RunCached(db, kInsertEvent, [&](SqliteStatement& s) {
      DDP_RETURN_IF_ERROR(s.BindBlob(1, changes.job_id));
      DDP_RETURN_IF_ERROR(s.BindInt64(2, event.index()));
      return s.BindBlob(3, record);
    }));
  }
  if (changes.drop_events_before <= 0) return absl::OkStatus();
  return RunCached(db, kDeleteOldEvents, [&](SqliteStatement& s) {
    DDP_RETURN_IF_ERROR(s.BindBlob(1, changes.job_id));
    return s.BindInt64(2, changes.drop_events_before);
  });
}

absl::Status DataLoss(absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("the job tables are inconsistent: ", what,
                   ". The database was damaged or edited by hand: restore it from a backup"));
}

// Runs the query `sql` and calls `row` with the statement on each row it
// returns, in order; the first error ends it.
absl::Status ForEachRow(SqliteDatabase& db, absl::string_view sql,
                        const std::function<absl::Status(const SqliteStatement&)>& row) {
  DDP_ASSIGN_OR_RETURN(SqliteStatement select, db.Prepare(sql));
  while (true) {
    DDP_ASSIGN_OR_RETURN(bool more, select.Step());
    if (!more) return absl::OkStatus();
    DDP_RETURN_IF_ERROR(row(select));
  }
}

absl::Status ReadAll(SqliteDatabase& db, std::vector<JobSnapshot>* out) {
  absl::flat_hash_map<std::string, size_t> index;
  DDP_RETURN_IF_ERROR(ForEachRow(
      db, "SELECT job_id, record, last_event_index, next_join_seq FROM jobs ORDER BY job_id",
      [&](const SqliteStatement& select) -> absl::Status {
        const std::string job_id = select.ColumnBlob(0);
        const JobCounters counters{select.ColumnInt64(2),
                                   static_cast<uint64_t>(select.ColumnInt64(3))};
        absl::StatusOr<JobRecord> job = DecodeJobRecord(select.ColumnBlob(1), counters);
        if (!job.ok()) {
          return DataLoss(absl::StrCat("job '", Printable(job_id), "': ", job.status().message()));
        }
        if (job->job_id() != job_id) {
          return DataLoss(absl::StrCat("the row of job '", Printable(job_id),
                                       "' holds the record of job '", Printable(job->job_id()),
                                       "'"));
        }
        index[job_id] = out->size();
        out->push_back(JobSnapshot{*std::move(job), {}, {}});
        return absl::OkStatus();
      }));
  auto find = [&](const char* table, const std::string& job_id) -> absl::StatusOr<JobSnapshot*> {
    auto it = index.find(job_id);
    if (it == index.end()) {
      return DataLoss(
          absl::StrCat(table, " has rows of job '", Printable(job_id), "' which has no record"));
    }
    return &(*out)[it->second];
  };
  DDP_RETURN_IF_ERROR(ForEachRow(
      db,
      "SELECT job_id, record, last_event_index, next_join_seq FROM job_runs "
      "ORDER BY job_id, run",
      [&](const SqliteStatement& select) -> absl::Status {
        DDP_ASSIGN_OR_RETURN(JobSnapshot * snapshot, find("job_runs", select.ColumnBlob(0)));
        const JobCounters counters{select.ColumnInt64(2),
                                   static_cast<uint64_t>(select.ColumnInt64(3))};
        absl::StatusOr<JobRecord> run = DecodeJobRecord(select.ColumnBlob(1), counters);
        if (!run.ok()) return DataLoss(absl::StrCat("a past run: ", run.status().message()));
        snapshot->past_runs.push_back(*std::move(run));
        return absl::OkStatus();
      }));
  DDP_RETURN_IF_ERROR(ForEachRow(
      db, "SELECT job_id, record FROM job_nodes ORDER BY job_id, node_id",
      [&](const SqliteStatement& select) -> absl::Status {
        DDP_ASSIGN_OR_RETURN(JobSnapshot * snapshot, find("job_nodes", select.ColumnBlob(0)));
        absl::StatusOr<NodeRecord> node = DecodeNodeRecord(select.ColumnBlob(1));
        if (!node.ok()) return DataLoss(node.status().message());
        snapshot->nodes.push_back(*std::move(node));
        return absl::OkStatus();
      }));
  return ForEachRow(
      db, "SELECT job_id, event_index, record FROM job_events ORDER BY job_id, event_index",
      [&](const SqliteStatement& select) -> absl::Status {
        const std::string job_id = select.ColumnBlob(0);
        DDP_ASSIGN_OR_RETURN(JobSnapshot * snapshot, find("job_events", job_id));
        absl::StatusOr<rendezvous::JobEvent> event = DecodeJobEvent(select.ColumnBlob(2), job_id);
        if (!event.ok()) return DataLoss(event.status().message());
        if (event->index() != select.ColumnInt64(1)) {
          return DataLoss(absl::StrCat("the row of event ", select.ColumnInt64(1), " of job '",
                                       Printable(job_id), "' holds event ", event->index()));
        }
        snapshot->events.push_back(*std::move(event));
        return absl::OkStatus();
      });
}

}  // namespace

absl::Status WritePastRun(SqliteDatabase& db, const JobRecord& run) {
  const std::string record = EncodeJobRecord(run);
  return RunCached(db, kInsertRun, [&](SqliteStatement& s) {
    DDP_RETURN_IF_ERROR(s.BindBlob(1, run.job_id()));
    DDP_RETURN_IF_ERROR(s.BindInt64(2, run.run()));
    DDP_RETURN_IF_ERROR(s.BindBlob(3, record));
    DDP_RETURN_IF_ERROR(s.BindInt64(4, run.last_event_index()));
    return s.BindInt64(5, Bits(run.next_join_seq()));
  });
}

absl::Status AddEventCounts(SqliteDatabase& db, const rendezvous::JobEventCounts& counts) {
  for (const auto& [key, count] : counts.counts) {
    DDP_RETURN_IF_ERROR(RunCached(db, kAddEventCount, [&](SqliteStatement& s) {
      DDP_RETURN_IF_ERROR(s.BindInt64(1, StoredEventType(key.first)));
      DDP_RETURN_IF_ERROR(s.BindInt64(2, key.second));
      return s.BindInt64(3, count);
    }));
  }
  return absl::OkStatus();
}

absl::StatusOr<rendezvous::JobEventCounts> ReadEventCounts(SqliteDatabase& db) {
  rendezvous::JobEventCounts counts;
  DDP_RETURN_IF_ERROR(
      ForEachRow(db, "SELECT type, cause, count FROM job_event_counts",
                 [&](const SqliteStatement& select) -> absl::Status {
                   absl::StatusOr<rendezvous::JobEventCounts::Key> key =
                       EventKeyFromStored(select.ColumnInt64(0), select.ColumnInt64(1));
                   if (!key.ok()) {
                     return DataLoss(absl::StrCat("job_event_counts: ", key.status().message()));
                   }
                   counts.Add(key->first, key->second, select.ColumnInt64(2));
                   return absl::OkStatus();
                 }));
  return counts;
}

absl::Status WriteJobChanges(SqliteDatabase& db, const JobChanges& changes) {
  if (changes.job && !changes.job_removed && changes.job->job_id() != changes.job_id) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JobChanges for job '", Printable(changes.job_id), "' carries a record of job '",
        Printable(changes.job->job_id()), "'; they must name the same job"));
  }
  if (changes.job_removed) return RemoveJob(db, changes);
  if (changes.job) {
    DDP_RETURN_IF_ERROR(WriteJob(db, *changes.job,
                                 changes.counters.value_or(rendezvous::CountersOf(*changes.job))));
  } else {
    DDP_ASSIGN_OR_RETURN(bool exists, JobExists(db, changes.job_id));
    if (!exists) {
      return absl::InvalidArgumentError(
          absl::StrCat("node changes for job '", Printable(changes.job_id),
                       "' which has no record; the first batch of a job must carry its record"));
    }
    if (changes.counters) {
      DDP_RETURN_IF_ERROR(RunCached(db, kUpdateCounters, [&](SqliteStatement& s) {
        DDP_RETURN_IF_ERROR(s.BindBlob(1, changes.job_id));
        DDP_RETURN_IF_ERROR(s.BindInt64(2, changes.counters->last_event_index));
        return s.BindInt64(3, Bits(changes.counters->next_join_seq));
      }));
    }
  }
  DDP_RETURN_IF_ERROR(WriteNodes(db, changes));
  return WriteEvents(db, changes);
}

absl::StatusOr<std::vector<JobSnapshot>> ReadJobSnapshots(SqliteDatabase& db) {
  // One read transaction: every table is read from the same snapshot.
  DDP_RETURN_IF_ERROR(db.Execute("BEGIN"));
  std::vector<JobSnapshot> jobs;
  absl::Status status = ReadAll(db, &jobs);
  if (!db.InAutocommit()) {
    absl::Status end = db.Execute(status.ok() ? "COMMIT" : "ROLLBACK");
    if (status.ok()) status = end;
  }
  if (!status.ok()) return status;
  return jobs;
}

}  // namespace ddp::storage
