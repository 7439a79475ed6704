#ifndef DDP_COORDINATOR_STORAGE_JOB_RECORD_CODEC_H_
#define DDP_COORDINATOR_STORAGE_JOB_RECORD_CODEC_H_

// The one place where what is stored differs from the core's records, for
// backward compatibility: a serialized ddp.state.v1 message per row
// (proto/ddp/state/v1/records.proto). The core keeps the stored messages
// themselves (rendezvous::JobRecord, NodeRecord): their bytes are written as
// they are, but for a job record's counters (last_event_index,
// next_join_seq), which SQLite keeps in columns of their own and engines
// without columns beside the record in one StoredJobRecord, both as earlier
// releases did. What remains converted: a job record stored by a release
// before 2026-11-27 (FailureRecord fields, upgraded on read to the API's
// Failure; settings without the hang timeout, written out) and job events
// (JobEventRecord, below).
//
// Decoding checks what the message format cannot: the job state, event type
// and restart cause are known values and durations are not negative
// (DATA_LOSS naming the field). Whether
// the records make a consistent job is Job::Restore's to check.
//
// Thread-safety: plain functions.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/rendezvous/job_state_store.h"

namespace ddp::storage {

// The record without its counters (they are stored beside it).
std::string EncodeJobRecord(const rendezvous::JobRecord& record);
// `counters` are the record's (stored beside it).
absl::StatusOr<rendezvous::JobRecord> DecodeJobRecord(absl::string_view bytes,
                                                      const rendezvous::JobCounters& counters);

// The record with `counters` in one message (StoredJobRecord), for engines
// without columns (storage/etcd); `counters` win over the record's.
std::string EncodeStoredJob(const rendezvous::JobRecord& record,
                            const rendezvous::JobCounters& counters);
absl::StatusOr<rendezvous::JobRecord> DecodeStoredJob(absl::string_view bytes);

std::string EncodeNodeRecord(const rendezvous::NodeRecord& node);
absl::StatusOr<rendezvous::NodeRecord> DecodeNodeRecord(absl::string_view bytes);

// A job event without its job id (the key holds it): a state.v1.JobEventRecord,
// the one converter of the core's event (ddp.v1.JobEvent) and deliberately a
// different message: it keeps the bytes earlier releases wrote and read
// (nanoseconds, bytes, the type numbered from 0), so that a data dir can go
// back a release. Decoding puts `job_id` back, checks the type and restart
// cause are known values and makes the strings valid UTF-8.
std::string EncodeJobEvent(const rendezvous::JobEvent& event);
absl::StatusOr<rendezvous::JobEvent> DecodeJobEvent(absl::string_view bytes,
                                                    const std::string& job_id);
// A stored event type number: jobs.proto's less one (JOB_CREATED = 1 is
// stored as 0), as in records and the SQLite event count columns.
int32_t StoredEventType(rendezvous::JobEventType type);
// The (type, restart cause) of stored numbers; DATA_LOSS naming them when
// either is no value this binary knows (they are checked before any cast).
absl::StatusOr<rendezvous::JobEventCounts::Key> EventKeyFromStored(int64_t type, int64_t cause);

// The event counts in one message (JobEventCountsRecord), for engines without
// columns.
std::string EncodeEventCounts(const rendezvous::JobEventCounts& counts);
absl::StatusOr<rendezvous::JobEventCounts> DecodeEventCounts(absl::string_view bytes);

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_JOB_RECORD_CODEC_H_
