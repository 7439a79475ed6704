#include "client/agent/registration.h"

#include <algorithm>

namespace ddp::client {

std::string AdvertisedAddress(const LaunchOptions& options, const std::string& hostname) {
  if (!options.local_addr.empty()) return options.local_addr;
  if (!hostname.empty()) return hostname;
  return "127.0.0.1";
}

v1::Register BuildRegistration(const LaunchOptions& options, const std::string& address,
                               const RegistrationDefaults& defaults) {
  v1::Register r;
  r.set_job_id(options.job_id);
  r.set_node_id(options.node_id);
  r.set_nproc(options.nproc_per_node);
  r.set_requested_rank(options.node_rank.value_or(-1));
  r.set_address(address);
  r.set_agent_version("ddp-client/1");
  r.set_role(options.role);
  const RendezvousConf& conf = options.rdzv_conf;
  v1::JobSettings* s = r.mutable_settings();
  s->set_min_nodes(options.min_nodes);
  s->set_max_nodes(options.max_nodes);
  s->set_nproc_per_node(options.nproc_per_node);
  s->set_max_restarts(options.max_restarts);
  s->set_join_timeout_ms(
      absl::ToInt64Milliseconds(conf.join_timeout.value_or(defaults.join_timeout)));
  // A join timeout shorter than the default last call shortens the last call
  // too (--rdzv-conf join_timeout=5 alone is valid).
  const absl::Duration join = conf.join_timeout.value_or(defaults.join_timeout);
  s->set_last_call_timeout_ms(absl::ToInt64Milliseconds(
      conf.last_call_timeout.value_or(std::min(defaults.last_call_timeout, join))));
  const absl::Duration heartbeat_timeout =
      conf.heartbeat_timeout.value_or(defaults.heartbeat_timeout);
  // The coordinator wants at least two heartbeats per timeout.
  const absl::Duration interval = std::min(defaults.heartbeat_interval, heartbeat_timeout / 4);
  s->set_heartbeat_interval_ms(std::max<int64_t>(10, absl::ToInt64Milliseconds(interval)));
  s->set_heartbeat_timeout_ms(absl::ToInt64Milliseconds(heartbeat_timeout));
  s->set_shutdown_timeout_ms(absl::ToInt64Milliseconds(options.shutdown_timeout));
  // --hang-timeout: the job's when this node creates it (0: off).
  s->set_hang_timeout_ms(absl::ToInt64Milliseconds(options.hang_timeout));
  if (options.straggler_exclude_factor != 0) {  // off: the fields stay unset
    s->set_straggler_exclude_factor(options.straggler_exclude_factor);
    s->set_straggler_exclude_after_ms(absl::ToInt64Milliseconds(options.straggler_exclude_after));
  }
  return r;
}

}  // namespace ddp::client
