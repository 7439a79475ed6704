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

void SettingsToProto(const JobSettings& s, v1::JobSettings* proto) {
  proto->set_min_nodes(s.min_nodes);
  proto->set_max_nodes(s.max_nodes);
  proto->set_nproc_per_node(s.nproc_per_node);
  proto->set_max_restarts(s.max_restarts);
  proto->set_join_timeout_ms(Ms(s.join_timeout));
  proto->set_last_call_timeout_ms(Ms(s.last_call_timeout));
  proto->set_heartbeat_interval_ms(Ms(s.heartbeat_interval));
  proto->set_heartbeat_timeout_ms(Ms(s.heartbeat_timeout));
  proto->set_shutdown_timeout_ms(Ms(s.shutdown_timeout));
  proto->set_straggler_exclude_factor(s.straggler_exclude_factor);
  proto->set_straggler_exclude_after_ms(Ms(s.straggler_exclude_after));
  proto->set_hang_timeout_ms(Ms(s.hang_timeout));
}

JobSettings SettingsFromProto(const v1::JobSettings& proto) {
  JobSettings s;
  s.min_nodes = proto.min_nodes();
  s.max_nodes = proto.max_nodes();
  s.nproc_per_node = proto.nproc_per_node();
  s.max_restarts = proto.max_restarts();
  s.join_timeout = absl::Milliseconds(proto.join_timeout_ms());
  s.last_call_timeout = absl::Milliseconds(proto.last_call_timeout_ms());
  s.heartbeat_interval = absl::Milliseconds(proto.heartbeat_interval_ms());
  s.heartbeat_timeout = absl::Milliseconds(proto.heartbeat_timeout_ms());
  s.shutdown_timeout = absl::Milliseconds(proto.shutdown_timeout_ms());
  s.straggler_exclude_factor = proto.straggler_exclude_factor();
  s.straggler_exclude_after = absl::Milliseconds(proto.straggler_exclude_after_ms());
  // Records stored before the setting existed: the default.
  s.hang_timeout = proto.has_hang_timeout_ms() ? absl::Milliseconds(proto.hang_timeout_ms())
                                               : kDefaultHangTimeout;
  return s;
}

JobSettings RequestedSettings(const v1::JobSettings& request) {
  v1::JobSettings filled;
  SettingsToProto(JobSettings{}, &filled);
  filled.set_max_restarts(0);  // 0 is "none", not unset
  if (request.min_nodes() != 0) filled.set_max_nodes(request.min_nodes());
  // Set fields win over the defaults (proto3 merges only non-zero scalars).
  filled.MergeFrom(request);
  JobSettings settings = SettingsFromProto(filled);
  if (settings.straggler_exclude_factor != 0 &&
      settings.straggler_exclude_after == absl::ZeroDuration()) {
    settings.straggler_exclude_after = kDefaultStragglerExcludeAfter;
  }
  return settings;
}

WorkerLease LeaseFor(const JobSettings& settings) {
  return WorkerLease{settings.heartbeat_timeout * 2 / 3, settings.heartbeat_timeout * 5 / 6};
}

absl::Status ValidateJobSettings(const JobSettings& s, const RendezvousLimits& limits) {
  if (s.min_nodes < 1) {
    return Bad(absl::StrCat("min_nodes=", s.min_nodes, " must be >= 1"));
  }
  if (s.max_nodes < s.min_nodes) {
    return Bad(absl::StrCat("max_nodes=", s.max_nodes, " must be >= min_nodes=", s.min_nodes));
  }
  if (s.max_nodes > limits.max_nodes) {
    return Bad(absl::StrCat("max_nodes=", s.max_nodes, " exceeds the coordinator's limit of ",
                            limits.max_nodes));
  }
  if (s.nproc_per_node < 1 || s.nproc_per_node > limits.max_nproc_per_node) {
    return Bad(absl::StrCat("nproc_per_node=", s.nproc_per_node, " must be in [1, ",
                            limits.max_nproc_per_node, "]"));
  }
  if (s.max_restarts < 0 || s.max_restarts > limits.max_restarts) {
    return Bad(absl::StrCat("max_restarts=", s.max_restarts, " must be in [0, ",
                            limits.max_restarts, "]"));
  }
  absl::Status status = CheckDuration("join_timeout", s.join_timeout, absl::ZeroDuration(), false,
                                      limits.max_timeout);
  if (!status.ok()) return status;
  status = CheckDuration("last_call_timeout", s.last_call_timeout, absl::ZeroDuration(), true,
                         s.join_timeout);
  if (!status.ok()) return status;
  status = CheckDuration("heartbeat_interval", s.heartbeat_interval, limits.min_heartbeat_interval,
                         true, limits.max_timeout / 2);
  if (!status.ok()) return status;
  status = CheckDuration("heartbeat_timeout", s.heartbeat_timeout, 2 * s.heartbeat_interval, true,
                         limits.max_timeout);
  if (!status.ok()) return status;
  status = CheckDuration("shutdown_timeout", s.shutdown_timeout, absl::ZeroDuration(), false,
                         limits.max_timeout);
  if (!status.ok()) return status;
  if (s.hang_timeout != absl::ZeroDuration()) {  // 0: off
    status = CheckDuration("hang_timeout (0 turns it off)", s.hang_timeout, kMinHangTimeout, true,
                           limits.max_timeout);
    if (!status.ok()) return status;
  }
  if (s.straggler_exclude_factor == 0) return absl::OkStatus();  // the policy is off
  if (!(s.straggler_exclude_factor >= kMinStragglerExcludeFactor &&
        s.straggler_exclude_factor <= kMaxStragglerExcludeFactor)) {
    return Bad(absl::StrCat("straggler_exclude_factor=", s.straggler_exclude_factor,
                            " must be 0 (off) or in [", kMinStragglerExcludeFactor, ", ",
                            kMaxStragglerExcludeFactor, "]"));
  }
  return CheckDuration("straggler_exclude_after", s.straggler_exclude_after, absl::ZeroDuration(),
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
  if (node.min_nodes != job.min_nodes) {
    return mismatch("min_nodes", node.min_nodes, job.min_nodes);
  }
  if (node.max_nodes != job.max_nodes) {
    return mismatch("max_nodes", node.max_nodes, job.max_nodes);
  }
  if (node.max_restarts != job.max_restarts) {
    return mismatch("max_restarts", node.max_restarts, job.max_restarts);
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
