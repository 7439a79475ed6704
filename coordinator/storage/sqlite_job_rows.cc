#include "coordinator/storage/sqlite_job_rows.h"

#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace ddp::rendezvous::sqlite_rows {
namespace {

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

uint64_t Uint64FromBits(int64_t bits) {
  uint64_t value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
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

std::string ReadFailure(RowReader& reader, FailureInfo* failure) {
  // Blobs of old rows may have been cut inside a UTF-8 sequence.
  failure->set_node_id(rendezvous::ValidUtf8(reader.Blob()));
  failure->set_generation(reader.Int64());
  failure->set_local_rank(reader.Int("local_rank"));
  failure->set_global_rank(reader.Int64());
  failure->set_exit_code(reader.Int("exit_code"));
  failure->set_signal(reader.Int("signal"));
  failure->set_message(rendezvous::ValidUtf8(reader.Blob()));
  failure->set_time_unix_ms(reader.Int64() / 1000000);  // stored in nanoseconds
  failure->set_hang(reader.Bool("hang"));
  failure->set_pid(reader.Int("pid"));
  return reader.error();
}

std::string ReadJobRow(RowReader& reader, JobRecord* job) {
  job->set_job_id(reader.Blob());
  // Rows of this form knew no straggler policy or hang timeout: the defaults.
  JobSettings& s = *job->mutable_settings();
  s = rendezvous::DefaultJobSettings();
  s.set_min_nodes(reader.Int("min_nodes"));
  s.set_max_nodes(reader.Int("max_nodes"));
  s.set_nproc_per_node(reader.Int("nproc_per_node"));
  s.set_max_restarts(reader.Int("max_restarts"));
  s.set_join_timeout_ms(reader.Int64());
  s.set_last_call_timeout_ms(reader.Int64());
  s.set_heartbeat_interval_ms(reader.Int64());
  s.set_heartbeat_timeout_ms(reader.Int64());
  s.set_shutdown_timeout_ms(reader.Int64());
  const int64_t state = reader.Int64();
  job->set_generation(reader.Int64());
  job->set_restart_count(reader.Int("restart_count"));
  const bool has_root_cause = reader.Bool("has_root_cause");
  FailureInfo root_cause;
  ReadFailure(reader, &root_cause);
  if (has_root_cause) *job->mutable_cause() = std::move(root_cause);
  job->set_finish_message(reader.Blob());
  job->mutable_master()->set_master_addr(reader.Blob());
  job->mutable_master()->set_master_port(reader.Int("master_port"));
  job->mutable_master()->set_nccl_unique_id(reader.Blob());
  job->set_world_size(reader.Int64());
  job->set_last_event_index(reader.Int64());
  job->set_next_join_seq(Uint64FromBits(reader.Int64()));
  job->set_created_unix_ns(reader.Int64());  // 0: unknown, as the record's
  job->set_run(reader.Int("run"));
  job->set_finished_unix_ns(reader.Int64());
  job->set_token_hash(reader.Blob());
  std::string error = reader.error();
  if (error.empty() && job->run() < 1) error = absl::StrCat("has run number ", job->run());
  std::optional<JobState> known = StateFromNumber(state);
  if (known) {
    rendezvous::SetJobState(*known, job);
  } else if (error.empty()) {
    error = absl::StrCat("has unknown state number ", state);
  }
  if (error.empty()) return "";
  return absl::StrCat("job '", absl::CHexEscape(job->job_id().substr(0, 64)), "' ", error);
}

std::string ReadNode(RowReader& reader, NodeRecord* node) {
  node->set_node_id(reader.Blob());
  node->set_incarnation(Uint64FromBits(reader.Int64()));
  node->set_nproc(reader.Int("nproc"));
  node->set_requested_rank(reader.Int("requested_rank"));
  node->set_address(reader.Blob());
  node->set_group_rank(reader.Int("group_rank"));
  node->set_global_rank_offset(reader.Int64());
  node->set_join_seq(Uint64FromBits(reader.Int64()));
  return reader.error();
}

}  // namespace ddp::rendezvous::sqlite_rows
