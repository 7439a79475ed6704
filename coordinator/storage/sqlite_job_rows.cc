#include "coordinator/storage/sqlite_job_rows.h"

#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace ddp::rendezvous::sqlite_rows {
namespace {

// Durations are stored in whole milliseconds (settings arrive in ms).
int64_t DurationMs(absl::Duration duration) { return absl::ToInt64Milliseconds(duration); }

// Unix nanoseconds; the infinite times map to the int64 extremes and back.
int64_t TimeNanos(absl::Time time) {
  if (time == absl::InfiniteFuture()) return std::numeric_limits<int64_t>::max();
  if (time == absl::InfinitePast()) return std::numeric_limits<int64_t>::min();
  return absl::ToUnixNanos(time);
}
absl::Time TimeFromNanos(int64_t nanos) {
  if (nanos == std::numeric_limits<int64_t>::max()) return absl::InfiniteFuture();
  if (nanos == std::numeric_limits<int64_t>::min()) return absl::InfinitePast();
  return absl::FromUnixNanos(nanos);
}

std::optional<JobState> StateFromNumber(int64_t number) {
  switch (number) {
    case static_cast<int64_t>(JobState::kWaiting):
    case static_cast<int64_t>(JobState::kStarting):
    case static_cast<int64_t>(JobState::kRunning):
    case static_cast<int64_t>(JobState::kRestarting):
    case static_cast<int64_t>(JobState::kSucceeded):
    case static_cast<int64_t>(JobState::kFailed):
    case static_cast<int64_t>(JobState::kCancelled):
      return static_cast<JobState>(number);
    default:
      return std::nullopt;
  }
}

}  // namespace

int64_t Uint64Bits(uint64_t value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

uint64_t Uint64FromBits(int64_t bits) {
  uint64_t value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

void RowBinder::Int(int64_t value) {
  const int index = next_++;
  if (status_.ok()) status_ = statement_.BindInt64(index, value);
}

void RowBinder::Blob(absl::string_view bytes) {
  const int index = next_++;
  if (status_.ok()) status_ = statement_.BindBlob(index, bytes);
}

int RowReader::Int(absl::string_view column) {
  const int64_t value = Int64();
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    if (error_.empty()) {
      error_ = absl::StrCat("has ", column, " ", value, ", outside the range of an int");
    }
    return 0;
  }
  return static_cast<int>(value);
}

bool RowReader::Bool(absl::string_view column) {
  const int64_t value = Int64();
  if (value != 0 && value != 1 && error_.empty()) {
    error_ = absl::StrCat("has ", column, " ", value, ", expected 0 or 1");
  }
  return value == 1;
}

void BindFailure(const FailureInfo& failure, RowBinder& binder) {
  binder.Blob(failure.node_id);
  binder.Int(failure.generation);
  binder.Int(failure.local_rank);
  binder.Int(failure.global_rank);
  binder.Int(failure.exit_code);
  binder.Int(failure.signal);
  binder.Blob(failure.message);
  binder.Int(TimeNanos(failure.time));
  binder.Int(failure.hang ? 1 : 0);
  binder.Int(failure.pid);
}

std::string ReadFailure(RowReader& reader, FailureInfo* failure) {
  failure->node_id = reader.Blob();
  failure->generation = reader.Int64();
  failure->local_rank = reader.Int("local_rank");
  failure->global_rank = reader.Int64();
  failure->exit_code = reader.Int("exit_code");
  failure->signal = reader.Int("signal");
  failure->message = reader.Blob();
  failure->time = TimeFromNanos(reader.Int64());
  failure->hang = reader.Bool("hang");
  failure->pid = reader.Int("pid");
  return reader.error();
}

absl::Status BindJobRow(const JobRecord& job, const JobCounters& counters, RowBinder& binder) {
  binder.Blob(job.job_id);
  const JobSettings& s = job.settings;
  binder.Int(s.min_nodes);
  binder.Int(s.max_nodes);
  binder.Int(s.nproc_per_node);
  binder.Int(s.max_restarts);
  binder.Int(DurationMs(s.join_timeout));
  binder.Int(DurationMs(s.last_call_timeout));
  binder.Int(DurationMs(s.heartbeat_interval));
  binder.Int(DurationMs(s.heartbeat_timeout));
  binder.Int(DurationMs(s.shutdown_timeout));
  binder.Int(static_cast<int64_t>(job.state));
  binder.Int(job.generation);
  binder.Int(job.restart_count);
  binder.Int(job.root_cause.has_value() ? 1 : 0);
  BindFailure(job.root_cause.value_or(FailureInfo{}), binder);
  binder.Blob(job.finish_message);
  binder.Blob(job.master.master_addr);
  binder.Int(job.master.master_port);
  binder.Blob(job.master.nccl_unique_id);
  binder.Int(job.world_size);
  binder.Int(counters.last_event_index);
  binder.Int(Uint64Bits(counters.next_join_seq));
  binder.Int(job.created == absl::Time() ? 0 : absl::ToUnixNanos(job.created));
  binder.Int(job.run);
  binder.Int(job.finished == absl::Time() ? 0 : absl::ToUnixNanos(job.finished));
  binder.Blob(job.token_hash);
  return binder.status();
}

std::string ReadJobRow(RowReader& reader, JobRecord* job) {
  job->job_id = reader.Blob();
  JobSettings& s = job->settings;
  s.min_nodes = reader.Int("min_nodes");
  s.max_nodes = reader.Int("max_nodes");
  s.nproc_per_node = reader.Int("nproc_per_node");
  s.max_restarts = reader.Int("max_restarts");
  s.join_timeout = absl::Milliseconds(reader.Int64());
  s.last_call_timeout = absl::Milliseconds(reader.Int64());
  s.heartbeat_interval = absl::Milliseconds(reader.Int64());
  s.heartbeat_timeout = absl::Milliseconds(reader.Int64());
  s.shutdown_timeout = absl::Milliseconds(reader.Int64());
  const int64_t state = reader.Int64();
  job->generation = reader.Int64();
  job->restart_count = reader.Int("restart_count");
  const bool has_root_cause = reader.Bool("has_root_cause");
  FailureInfo root_cause;
  ReadFailure(reader, &root_cause);
  if (has_root_cause) job->root_cause = std::move(root_cause);
  job->finish_message = reader.Blob();
  job->master.master_addr = reader.Blob();
  job->master.master_port = reader.Int("master_port");
  job->master.nccl_unique_id = reader.Blob();
  job->world_size = reader.Int64();
  job->last_event_index = reader.Int64();
  job->next_join_seq = Uint64FromBits(reader.Int64());
  const int64_t created_ns = reader.Int64();
  job->created = created_ns == 0 ? absl::Time() : absl::FromUnixNanos(created_ns);
  job->run = reader.Int("run");
  const int64_t finished_ns = reader.Int64();
  job->finished = finished_ns == 0 ? absl::Time() : absl::FromUnixNanos(finished_ns);
  job->token_hash = reader.Blob();
  std::string error = reader.error();
  if (error.empty() && job->run < 1) error = absl::StrCat("has run number ", job->run);
  std::optional<JobState> known = StateFromNumber(state);
  if (known) {
    job->state = *known;
  } else if (error.empty()) {
    error = absl::StrCat("has unknown state number ", state);
  }
  if (error.empty()) return "";
  return absl::StrCat("job '", absl::CHexEscape(job->job_id.substr(0, 64)), "' ", error);
}

absl::Status BindNode(const NodeRecord& node, RowBinder& binder) {
  binder.Blob(node.node_id);
  binder.Int(Uint64Bits(node.incarnation));
  binder.Int(node.nproc);
  binder.Int(node.requested_rank);
  binder.Blob(node.address);
  binder.Int(node.group_rank);
  binder.Int(node.global_rank_offset);
  binder.Int(Uint64Bits(node.join_seq));
  return binder.status();
}

std::string ReadNode(RowReader& reader, NodeRecord* node) {
  node->node_id = reader.Blob();
  node->incarnation = Uint64FromBits(reader.Int64());
  node->nproc = reader.Int("nproc");
  node->requested_rank = reader.Int("requested_rank");
  node->address = reader.Blob();
  node->group_rank = reader.Int("group_rank");
  node->global_rank_offset = reader.Int64();
  node->join_seq = Uint64FromBits(reader.Int64());
  return reader.error();
}

}  // namespace ddp::rendezvous::sqlite_rows
