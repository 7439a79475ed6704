#ifndef DDP_COORDINATOR_STORAGE_JOB_RECORD_CODEC_H_
#define DDP_COORDINATOR_STORAGE_JOB_RECORD_CODEC_H_

// The one mapping between the rendezvous core's records and what is stored:
// a serialized ddp.state.v1 message per row (proto/ddp/state/v1/records.proto).
// SQLite stores a job record without its counters (last_event_index,
// next_join_seq), which have columns of their own; engines without columns
// store both in one StoredJobRecord.
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

std::string EncodeJobRecord(const rendezvous::JobRecord& record);
// `counters` replace the record's (they are stored beside it).
absl::StatusOr<rendezvous::JobRecord> DecodeJobRecord(absl::string_view bytes,
                                                      const rendezvous::JobCounters& counters);

// The record with its counters in one message (StoredJobRecord), for engines
// without columns (storage/etcd).
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
