#include "coordinator/rendezvous/job_types.h"

#include <string.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp::rendezvous {

FailureInfo NodeFailure(std::string node_id, Generation generation, absl::Time time,
                        std::string message) {
  FailureInfo f;
  f.set_node_id(std::move(node_id));
  f.set_generation(generation);
  f.set_local_rank(-1);
  f.set_global_rank(-1);
  SetFailureTime(time, &f);
  f.set_message(std::move(message));
  return f;
}

MasterInfo NewMasterInfo(std::string master_addr, int master_port, std::string nccl_unique_id) {
  MasterInfo info;
  info.set_master_addr(std::move(master_addr));
  info.set_master_port(master_port);
  info.set_nccl_unique_id(std::move(nccl_unique_id));
  return info;
}

absl::Time FailureTime(const FailureInfo& failure) {
  return absl::FromUnixMillis(failure.time_unix_ms());
}

void SetFailureTime(absl::Time time, FailureInfo* failure) {
  failure->set_time_unix_ms(absl::ToUnixMillis(time));
}

bool FailedEarlier(const FailureInfo& a, const FailureInfo& b) {
  // A stopped process stalls its peers, never the other way round.
  if (a.process_stopped() != b.process_stopped()) return a.process_stopped();
  if (a.time_unix_ms() != b.time_unix_ms()) return a.time_unix_ms() < b.time_unix_ms();
  return a.global_rank() < b.global_rank();
}

std::string DescribeFailure(const FailureInfo& f) {
  if (f.local_rank() < 0) return f.message();
  if (f.hang() && f.process_stopped()) return "hang (no heartbeat; the process was stopped)";
  if (f.hang()) return "hang (no heartbeat)";
  if (f.signal() != 0) {
    const char* abbrev = sigabbrev_np(f.signal());
    return abbrev != nullptr ? absl::StrCat("signal ", f.signal(), " (SIG", abbrev, ")")
                             : absl::StrCat("signal ", f.signal());
  }
  return absl::StrCat("exit code ", f.exit_code());
}

namespace {
// Whether `c` continues a UTF-8 sequence (10xxxxxx).
bool Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }
}  // namespace

std::string Utf8Prefix(absl::string_view text, int limit) {
  size_t end = static_cast<size_t>(std::max(limit, 0));
  if (text.size() <= end) return std::string(text);
  while (end > 0 && Continuation(text[end])) --end;  // text[end] starts the cut sequence
  return std::string(text.substr(0, end));
}

std::string Utf8Suffix(absl::string_view text, int limit) {
  const size_t max = static_cast<size_t>(std::max(limit, 0));
  if (text.size() <= max) return std::string(text);
  size_t begin = text.size() - max;
  while (begin < text.size() && Continuation(text[begin])) ++begin;
  return std::string(text.substr(begin));
}

std::string ValidUtf8(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    // The length of the sequence `c` starts and the least code point it may
    // encode (shorter encodings are invalid); 0: not a leading byte.
    size_t length = 0;
    uint32_t code = 0;
    uint32_t least = 0;
    if (c < 0x80) {
      length = 1;
      code = c;
    } else if ((c & 0xE0) == 0xC0) {
      length = 2;
      code = c & 0x1F;
      least = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3;
      code = c & 0x0F;
      least = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4;
      code = c & 0x07;
      least = 0x10000;
    }
    bool valid = length > 0 && i + length <= text.size();
    for (size_t k = 1; valid && k < length; ++k) {
      valid = Continuation(text[i + k]);
      code = (code << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    }
    valid = valid && code >= least && code <= 0x10FFFF && !(code >= 0xD800 && code <= 0xDFFF);
    if (valid) {
      out.append(text.data() + i, length);
      i += length;
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD
      ++i;
    }
  }
  return out;
}

// The API numbers the states from 1 (0 is unset), in the core's order.
static_assert(static_cast<int>(JobState::kWaiting) + 1 == v1::WAITING &&
                  static_cast<int>(JobState::kStarting) + 1 == v1::STARTING &&
                  static_cast<int>(JobState::kRunning) + 1 == v1::RUNNING &&
                  static_cast<int>(JobState::kRestarting) + 1 == v1::RESTARTING &&
                  static_cast<int>(JobState::kSucceeded) + 1 == v1::SUCCEEDED &&
                  static_cast<int>(JobState::kFailed) + 1 == v1::FAILED &&
                  static_cast<int>(JobState::kCancelled) + 1 == v1::CANCELLED,
              "JobState and ddp.v1.JobState must differ by one");

v1::JobState JobStateToProto(JobState state) {
  return static_cast<v1::JobState>(static_cast<int>(state) + 1);
}

absl::StatusOr<JobState> JobStateFromProto(v1::JobState state) {
  if (state < v1::WAITING || state > v1::CANCELLED) {
    return absl::InvalidArgumentError(absl::StrCat("job state ", static_cast<int>(state),
                                                   " is not a state; use WAITING..CANCELLED"));
  }
  return static_cast<JobState>(state - 1);
}

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kWaiting:
      return "waiting";
    case JobState::kStarting:
      return "starting";
    case JobState::kRunning:
      return "running";
    case JobState::kRestarting:
      return "restarting";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

const char* RestartCauseName(RestartCause cause) {
  switch (cause) {
    case RestartCause::WORKER_FAILURE:
      return "worker_failure";
    case RestartCause::HANG:
      return "hang";
    case RestartCause::NODE_LOSS:
      return "node_loss";
    case RestartCause::SCALE:
      return "scale";
    case RestartCause::OPERATOR:
      return "operator";
    case RestartCause::DRAIN:
      return "drain";
    default:
      return "";
  }
}

absl::Time EventTime(const JobEvent& event) { return absl::FromUnixMillis(event.time_unix_ms()); }

void SetEventTime(absl::Time time, JobEvent* event) {
  event->set_time_unix_ms(absl::ToUnixMillis(time));
}

}  // namespace ddp::rendezvous
