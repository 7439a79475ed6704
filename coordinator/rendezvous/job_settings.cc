#include "coordinator/rendezvous/job_settings.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddp::rendezvous {
namespace {

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("invalid job settings: ", what));
}

absl::Status CheckDuration(const char* name, absl::Duration value, absl::Duration low,
                           bool low_inclusive, absl::Duration high) {
  bool too_low = low_inclusive ? value < low : value <= low;
  if (too_low || value > high) {
    return Bad(absl::StrCat(name, "=", absl::FormatDuration(value), " is out of range; it must be ",
                            low_inclusive ? ">= " : "> ", absl::FormatDuration(low),
                            " and <= ", absl::FormatDuration(high)));
  }
  return absl::OkStatus();
}

int64_t Ms(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

}  // namespace

JobSettings DefaultJobSettings() {
  JobSettings s;
  s.set_min_nodes(1);
  s.set_max_nodes(1);
  s.set_nproc_per_node(1);
  s.set_max_restarts(3);
  s.set_join_timeout_ms(Ms(absl::Seconds(600)));
  s.set_last_call_timeout_ms(Ms(absl::Seconds(30)));
  s.set_heartbeat_interval_ms(Ms(absl::Milliseconds(500)));
  s.set_heartbeat_timeout_ms(Ms(absl::Seconds(3)));
  s.set_shutdown_timeout_ms(Ms(absl::Seconds(30)));
  s.set_hang_timeout_ms(Ms(kDefaultHangTimeout));
  return s;
}

absl::Duration JoinTimeout(const JobSettings& s) { return absl::Milliseconds(s.join_timeout_ms()); }
absl::Duration LastCallTimeout(const JobSettings& s) {
  return absl::Milliseconds(s.last_call_timeout_ms());
}
absl::Duration HeartbeatInterval(const JobSettings& s) {
  return absl::Milliseconds(s.heartbeat_interval_ms());
}
absl::Duration HeartbeatTimeout(const JobSettings& s) {
  return absl::Milliseconds(s.heartbeat_timeout_ms());
}
absl::Duration ShutdownTimeout(const JobSettings& s) {
  return absl::Milliseconds(s.shutdown_timeout_ms());
}
absl::Duration StragglerExcludeAfter(const JobSettings& s) {
  return absl::Milliseconds(s.straggler_exclude_after_ms());
}
absl::Duration HangTimeout(const JobSettings& s) {
  // Records stored before the setting existed: the default.
  return s.has_hang_timeout_ms() ? absl::Milliseconds(s.hang_timeout_ms()) : kDefaultHangTimeout;
}

JobSettings RequestedSettings(const JobSettings& request) {
  JobSettings settings = DefaultJobSettings();
  settings.set_max_restarts(0);  // 0 is "none", not unset
  if (request.min_nodes() != 0) settings.set_max_nodes(request.min_nodes());
  // Set fields win over the defaults (proto3 merges only non-zero scalars).
  settings.MergeFrom(request);
  if (settings.straggler_exclude_factor() != 0 && settings.straggler_exclude_after_ms() == 0) {
    settings.set_straggler_exclude_after_ms(Ms(kDefaultStragglerExcludeAfter));
  }
  return settings;
}

WorkerLease LeaseFor(const JobSettings& settings) {
  const absl::Duration timeout = HeartbeatTimeout(settings);
  return WorkerLease{timeout * 2 / 3, timeout * 5 / 6};
}

absl::Status ValidateJobSettings(const JobSettings& s, const RendezvousLimits& limits) {
  if (s.min_nodes() < 1) {
    return Bad(absl::StrCat("min_nodes=", s.min_nodes(), " must be >= 1"));
  }
  if (s.max_nodes() < s.min_nodes()) {
    return Bad(absl::StrCat("max_nodes=", s.max_nodes(), " must be >= min_nodes=", s.min_nodes()));
  }
  if (s.max_nodes() > limits.max_nodes) {
    return Bad(absl::StrCat("max_nodes=", s.max_nodes(), " exceeds the coordinator's limit of ",
                            limits.max_nodes));
  }
  if (s.nproc_per_node() < 1 || s.nproc_per_node() > limits.max_nproc_per_node) {
    return Bad(absl::StrCat("nproc_per_node=", s.nproc_per_node(), " must be in [1, ",
                            limits.max_nproc_per_node, "]"));
  }
  if (s.max_restarts() < 0 || s.max_restarts() > limits.max_restarts) {
    return Bad(absl::StrCat("max_restarts=", s.max_restarts(), " must be in [0, ",
                            limits.max_restarts, "]"));
  }
  absl::Status status = CheckDuration("join_timeout", JoinTimeout(s), absl::ZeroDuration(), false,
                                      limits.max_timeout);
  if (!status.ok()) return status;
  status = CheckDuration("last_call_timeout", LastCallTimeout(s), absl::ZeroDuration(), true,
                         JoinTimeout(s));
  if (!status.ok()) return status;
  status = CheckDuration("heartbeat_interval", HeartbeatInterval(s), limits.min_heartbeat_interval,
                         true, limits.max_timeout / 2);
  if (!status.ok()) return status;
  status = CheckDuration("heartbeat_timeout", HeartbeatTimeout(s), 2 * HeartbeatInterval(s), true,
                         limits.max_timeout);
  if (!status.ok()) return status;
  status = CheckDuration("shutdown_timeout", ShutdownTimeout(s), absl::ZeroDuration(), false,
                         limits.max_timeout);
  if (!status.ok()) return status;
  if (HangTimeout(s) != absl::ZeroDuration()) {  // 0: off
    status = CheckDuration("hang_timeout (0 turns it off)", HangTimeout(s), kMinHangTimeout, true,
                           limits.max_timeout);
    if (!status.ok()) return status;
  }
  if (s.straggler_exclude_factor() == 0) return absl::OkStatus();  // the policy is off
  if (!(s.straggler_exclude_factor() >= kMinStragglerExcludeFactor &&
        s.straggler_exclude_factor() <= kMaxStragglerExcludeFactor)) {
    return Bad(absl::StrCat("straggler_exclude_factor=", s.straggler_exclude_factor(),
                            " must be 0 (off) or in [", kMinStragglerExcludeFactor, ", ",
                            kMaxStragglerExcludeFactor, "]"));
  }
  return CheckDuration("straggler_exclude_after", StragglerExcludeAfter(s), absl::ZeroDuration(),
                       false, limits.max_timeout);
}

absl::Status CheckCompatibleSettings(const std::string& job_id, const JobSettings& job,
                                     const std::string& node_id, const JobSettings& node) {
  auto mismatch = [&](const char* field, int node_value, int job_value) {
    return absl::FailedPreconditionError(
        absl::StrFormat("node '%s' asks for %s=%d but job '%s' has %s=%d; start the agent "
                        "with the job's settings or use another job id",
                        Capped(node_id), field, node_value, Capped(job_id), field, job_value));
  };
  if (node.min_nodes() != job.min_nodes()) {
    return mismatch("min_nodes", node.min_nodes(), job.min_nodes());
  }
  if (node.max_nodes() != job.max_nodes()) {
    return mismatch("max_nodes", node.max_nodes(), job.max_nodes());
  }
  if (node.max_restarts() != job.max_restarts()) {
    return mismatch("max_restarts", node.max_restarts(), job.max_restarts());
  }
  return absl::OkStatus();
}

absl::Status ValidateId(const std::string& id, const char* what, const RendezvousLimits& limits) {
  if (id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  }
  if (static_cast<int>(id.size()) > limits.max_id_length) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", Capped(id), "' is ", id.size(),
                                                   " bytes; the limit is ", limits.max_id_length));
  }
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == ':';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " '", Capped(id), "' has a character outside [A-Za-z0-9._:-]; rename it"));
    }
  }
  return absl::OkStatus();
}

std::string Capped(const std::string& text) {
  constexpr size_t kMax = 64;
  if (text.size() <= kMax) return text;
  return absl::StrCat(text.substr(0, kMax), "...(", text.size(), " bytes)");
}

}  // namespace ddp::rendezvous
