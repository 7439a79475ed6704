#include "coordinator/storage/job_record_codec.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ddp/state/v1/records.pb.h"

namespace ddp::storage {
namespace {

namespace pb = ::ddp::state::v1;
using rendezvous::FailureInfo;
using rendezvous::JobEvent;
using rendezvous::JobEventCounts;
using rendezvous::JobEventType;
using rendezvous::JobRecord;
using rendezvous::JobSettings;
using rendezvous::JobState;
using rendezvous::NodeRecord;
using rendezvous::RestartCause;

// Event times (JobEventRecord) are stored in nanoseconds, 0: unknown.
int64_t Ns(absl::Time t) { return t == absl::Time() ? 0 : absl::ToUnixNanos(t); }
absl::Time TimeFromNs(int64_t ns) { return ns == 0 ? absl::Time() : absl::FromUnixNanos(ns); }

// A failure stored by a release before 2026-11-27 (FailureRecord: bytes,
// nanoseconds), as the core keeps it now. Its strings may have been cut
// inside a UTF-8 sequence: they are made valid (proto3 strings must be).
FailureInfo FromLegacyRecord(const pb::FailureRecord& f) {
  FailureInfo out;
  out.set_node_id(rendezvous::ValidUtf8(f.node_id()));
  out.set_generation(f.generation());
  out.set_local_rank(f.local_rank());
  out.set_global_rank(f.global_rank());
  out.set_exit_code(f.exit_code());
  out.set_signal(f.signal());
  out.set_message(rendezvous::ValidUtf8(f.message()));
  out.set_time_unix_ms(f.time_unix_ns() / 1000000);
  out.set_hang(f.hang());
  out.set_pid(f.pid());
  out.set_process_stopped(f.process_stopped());
  out.set_stderr_tail(rendezvous::ValidUtf8(f.stderr_tail()));
  out.set_traceback(rendezvous::ValidUtf8(f.traceback()));
  out.set_log_path(rendezvous::ValidUtf8(f.log_path()));
  return out;
}

// The stored settings are exact (every field was written): no defaults, but
// for the hang timeout of records stored before it existed, which is written
// out (as the API has always shown it).
absl::StatusOr<JobSettings> SettingsFromStored(const JobSettings& stored) {
  for (auto [name, ms] : {std::pair{"join_timeout_ms", stored.join_timeout_ms()},
                          {"last_call_timeout_ms", stored.last_call_timeout_ms()},
                          {"heartbeat_interval_ms", stored.heartbeat_interval_ms()},
                          {"heartbeat_timeout_ms", stored.heartbeat_timeout_ms()},
                          {"shutdown_timeout_ms", stored.shutdown_timeout_ms()}}) {
    if (ms < 0)
      return absl::DataLossError(absl::StrCat("settings.", name, " is negative (", ms, ")"));
  }
  JobSettings settings = stored;
  if (!settings.has_hang_timeout_ms()) {
    settings.set_hang_timeout_ms(absl::ToInt64Milliseconds(rendezvous::HangTimeout(stored)));
  }
  return settings;
}

// The record as stored: without its counters, which the stores keep apart
// (see records.proto), so that the bytes are those earlier releases wrote.
pb::JobRecord WithoutCounters(const JobRecord& record) {
  pb::JobRecord stored = record;
  stored.clear_last_event_index();
  stored.clear_next_join_seq();
  return stored;
}

// What stored bytes may hold that the core's record may not: failures in the
// form of releases before 2026-11-27 (upgraded to the API's Failure), a state
// that is no JobState, negative durations, settings without the hang timeout.
// The stored counters are put back.
absl::StatusOr<JobRecord> RecordFromStored(JobRecord stored,
                                           const rendezvous::JobCounters& counters) {
  if (stored.state() < static_cast<int32_t>(JobState::kWaiting) ||
      stored.state() > static_cast<int32_t>(JobState::kCancelled)) {
    return absl::DataLossError(absl::StrCat("job state ", stored.state(), " is not a known state"));
  }
  DDP_ASSIGN_OR_RETURN(*stored.mutable_settings(), SettingsFromStored(stored.settings()));
  if (!stored.has_cause() && stored.has_root_cause()) {
    *stored.mutable_cause() = FromLegacyRecord(stored.root_cause());
  }
  stored.clear_root_cause();
  for (const pb::FailureRecord& f : stored.failures()) {
    *stored.add_failure_history() = FromLegacyRecord(f);
  }
  stored.clear_failures();
  rendezvous::SetCounters(counters, &stored);
  return stored;
}

// `bytes` parsed as a `Message`; DATA_LOSS naming `what`, the size and the
// message type otherwise.
template <typename Message>
absl::StatusOr<Message> Parse(absl::string_view bytes, absl::string_view what) {
  Message message;
  if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(absl::StrCat(what, " (", bytes.size(), " bytes) is not a ",
                                            Message::descriptor()->full_name()));
  }
  return message;
}

}  // namespace

std::string EncodeJobRecord(const JobRecord& record) {
  return WithoutCounters(record).SerializeAsString();
}

absl::StatusOr<JobRecord> DecodeJobRecord(absl::string_view bytes,
                                          const rendezvous::JobCounters& counters) {
  DDP_ASSIGN_OR_RETURN(JobRecord stored, Parse<pb::JobRecord>(bytes, "a job record"));
  return RecordFromStored(std::move(stored), counters);
}

std::string EncodeStoredJob(const JobRecord& record, const rendezvous::JobCounters& counters) {
  pb::StoredJobRecord out;
  *out.mutable_record() = WithoutCounters(record);
  out.set_last_event_index(counters.last_event_index);
  out.set_next_join_seq(counters.next_join_seq);
  return out.SerializeAsString();
}

absl::StatusOr<JobRecord> DecodeStoredJob(absl::string_view bytes) {
  DDP_ASSIGN_OR_RETURN(pb::StoredJobRecord in, Parse<pb::StoredJobRecord>(bytes, "a stored job"));
  return RecordFromStored(std::move(*in.mutable_record()),
                          rendezvous::JobCounters{in.last_event_index(), in.next_join_seq()});
}

// The core keeps the stored message itself (rendezvous::NodeRecord): its
// bytes as they are.
std::string EncodeNodeRecord(const NodeRecord& n) { return n.SerializeAsString(); }

absl::StatusOr<NodeRecord> DecodeNodeRecord(absl::string_view bytes) {
  DDP_ASSIGN_OR_RETURN(NodeRecord n, Parse<pb::NodeRecord>(bytes, "a node record"));
  if (n.drain_leaves_at_unix_ms() == 0) n.clear_drain_reason();  // no drain, no reason
  return n;
}

int32_t StoredEventType(JobEventType type) { return static_cast<int32_t>(type) - 1; }

absl::StatusOr<JobEventCounts::Key> EventKeyFromStored(int64_t type, int64_t cause) {
  const int64_t api_type = type + 1;
  if (api_type < JobEvent::Type_MIN || api_type > JobEvent::Type_MAX ||
      !JobEvent::Type_IsValid(static_cast<int>(api_type)) ||
      api_type == JobEvent::TYPE_UNSPECIFIED) {
    return absl::DataLossError(absl::StrCat("job event type ", type, " is not a known type"));
  }
  if (cause < v1::RestartCause_MIN || cause > v1::RestartCause_MAX ||
      !v1::RestartCause_IsValid(static_cast<int>(cause))) {
    return absl::DataLossError(absl::StrCat("restart cause ", cause, " is not a known cause"));
  }
  return JobEventCounts::Key{static_cast<JobEventType>(api_type), static_cast<RestartCause>(cause)};
}

std::string EncodeJobEvent(const JobEvent& e) {
  pb::JobEventRecord out;
  out.set_index(e.index());
  out.set_time_unix_ns(Ns(rendezvous::EventTime(e)));
  out.set_type(StoredEventType(e.type()));
  out.set_node_id(e.node_id());
  out.set_generation(e.generation());
  out.set_message(e.message());
  if (e.has_failure()) *out.mutable_worker_failure() = e.failure();
  out.set_restart_cause(e.restart_cause());
  if (e.last_checkpoint_unix_ms() != 0) {
    out.set_last_checkpoint_unix_ns(e.last_checkpoint_unix_ms() * 1'000'000);
    out.set_last_checkpoint_step(e.last_checkpoint_step());
  }
  return out.SerializeAsString();
}

absl::StatusOr<JobEvent> DecodeJobEvent(absl::string_view bytes, const std::string& job_id) {
  DDP_ASSIGN_OR_RETURN(pb::JobEventRecord in, Parse<pb::JobEventRecord>(bytes, "a job event"));
  DDP_ASSIGN_OR_RETURN(JobEventCounts::Key key, EventKeyFromStored(in.type(), in.restart_cause()));
  JobEvent e;
  e.set_job_id(job_id);
  e.set_index(in.index());
  rendezvous::SetEventTime(TimeFromNs(in.time_unix_ns()), &e);
  e.set_type(key.first);
  // Kept as bytes: cut by earlier releases inside a UTF-8 sequence, perhaps.
  e.set_node_id(rendezvous::ValidUtf8(in.node_id()));
  e.set_generation(in.generation());
  e.set_message(rendezvous::ValidUtf8(in.message()));
  if (in.has_worker_failure()) {
    *e.mutable_failure() = in.worker_failure();
  } else if (in.has_failure()) {
    *e.mutable_failure() = FromLegacyRecord(in.failure());
  }
  e.set_restart_cause(key.second);
  if (in.last_checkpoint_unix_ns() != 0) {
    e.set_last_checkpoint_unix_ms(absl::ToUnixMillis(TimeFromNs(in.last_checkpoint_unix_ns())));
    e.set_last_checkpoint_step(in.last_checkpoint_step());
  }
  return e;
}

std::string EncodeEventCounts(const JobEventCounts& counts) {
  pb::JobEventCountsRecord out;
  for (const auto& [key, count] : counts.counts) {
    pb::JobEventCountsRecord::Count* c = out.add_counts();
    c->set_type(StoredEventType(key.first));
    c->set_cause(key.second);
    c->set_count(count);
  }
  return out.SerializeAsString();
}

absl::StatusOr<JobEventCounts> DecodeEventCounts(absl::string_view bytes) {
  DDP_ASSIGN_OR_RETURN(pb::JobEventCountsRecord in,
                       Parse<pb::JobEventCountsRecord>(bytes, "an event counts record"));
  JobEventCounts counts;
  for (const pb::JobEventCountsRecord::Count& c : in.counts()) {
    DDP_ASSIGN_OR_RETURN(JobEventCounts::Key key, EventKeyFromStored(c.type(), c.cause()));
    counts.Add(key.first, key.second, c.count());
  }
  return counts;
}

}  // namespace ddp::storage
