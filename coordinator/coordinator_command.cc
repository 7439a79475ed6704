// The coordinator command (coordinator_command.h): parses flags, starts the
// CoordinatorServer, writes the bound port to --port-file, and shuts down
// cleanly on SIGINT/SIGTERM.
//
// With --store etcd://... it is one of the coordinators sharing the prefix:
// HaCoordinator elects the leader, the others stand by and redirect.
//
// Exit codes: 0 clean shutdown; 1 runtime failure (data dir locked, cannot
// listen, storage error, etcd unreachable); 2 bad flags; 3 data error; 4
// address in use (checked before the data dir is touched); 5 lost the
// leadership.

#include "coordinator/coordinator_command.h"

#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/internal/private_handle_accessor.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/exit_codes.h"
#include "common/flag_names.h"
#include "common/listen_address.h"
#include "common/logging.h"
#include "common/proc_stats.h"
#include "common/status_macros.h"
#include "common/tls_files.h"
#include "common/token_file.h"
#include "common/version.h"
#include "coordinator/fleet/node_ledger.h"
#include "coordinator/server/connection_guard.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/server/ha_coordinator.h"
#include "coordinator/server/state_copy_command.h"
#include "coordinator/storage/etcd/etcd_store_spec.h"

ABSL_FLAG(int, port, 29400, "TCP port to serve gRPC on; 0 picks any free port (see --port-file)");
ABSL_FLAG(std::string, bind, "",
          "Address to listen on, e.g. 0.0.0.0, 127.0.0.1 or [::]. Default: 127.0.0.1 without "
          "--admin-token-file (no authorization: only this machine can call), 0.0.0.0 with it");
ABSL_FLAG(std::string, data_dir, ddp::server::kDefaultDataDir,
          "Directory of the durable state (coordinator.db) and its LOCK file, relative to the "
          "working directory unless absolute; created if missing. Only one coordinator may use a "
          "directory at a time. A service gives an absolute one, e.g. /var/lib/ddp-coordinator");
ABSL_FLAG(std::string, store, "",
          "Where the state lives: empty (default) = SQLite in --data-dir; "
          "etcd://HOST:PORT[,HOST:PORT...][/PREFIX] = an etcd 3.4 cluster (run it with "
          "--max-txn-ops 100000; give IP addresses to use every member). Coordinators on one "
          "prefix elect a leader; the others stand by and redirect clients to it");
ABSL_FLAG(std::string, copy_state_to, "",
          "etcd://HOST:PORT[,...][/PREFIX]: copy the state of --data-dir (SQLite: keys, "
          "leases, jobs with their nodes and past runs; not the watch history) into this "
          "empty etcd prefix in one transaction, then exit (0: copied). How a site moves to "
          "--store etcd://; stop the coordinator of --data-dir first (its LOCK is taken)");
ABSL_FLAG(std::string, advertise_host, "",
          "With --store etcd://: the host (name or address) clients dial to reach this "
          "coordinator when it leads; standbys redirect them there. Default: --bind, or this "
          "machine's hostname when --bind is 0.0.0.0 or ::");
ABSL_FLAG(int64_t, leader_lease_ms, 2000,
          "With --store etcd://: the lease of the leader key in etcd, in milliseconds (etcd "
          "raises it to 1.5 x its --election-timeout at least). A leader that cannot renew it "
          "stops serving (exit 5); a dead leader is replaced after at most this long. Agents "
          "keep their workers through a failover shorter than the job's heartbeat timeout");
ABSL_FLAG(std::string, port_file, "",
          "If set, write the bound port (one line) to this file once serving, "
          "atomically "
          "(temporary file + rename); tools and tests read it with --port 0");
ABSL_FLAG(int, http_port, 29480,
          "TCP port of the HTTP listener: REST API under /v1/, /healthz, /readyz. "
          "0 turns HTTP off; -1 picks any free port (see --http-port-file). With --port 0 "
          "and no --http-port, HTTP picks any free port too");
ABSL_FLAG(int64_t, http_max_connections, 1024,
          "HTTP connections served at once; a request on a connection beyond it gets 503 "
          "(health probes are answered whatever the load)");
ABSL_FLAG(int64_t, http_max_connections_per_client, 64,
          "HTTP connections served at once from one client address; a request on a "
          "connection beyond it gets 429 (health probes are answered whatever the load)");
ABSL_FLAG(int64_t, http_header_timeout_ms, 10000,
          "An HTTP request head must arrive whole within this many milliseconds of the "
          "connection (or of the previous reply); else 408 and the connection is closed");
ABSL_FLAG(std::string, http_port_file, "",
          "If set, write the bound HTTP port (one line) to this file once serving, "
          "atomically, like --port-file");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: serve gRPC over TLS (plaintext is refused); with --tls-key. "
          "Reloaded when the file changes (checked every 10 s)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificates: require and verify client certificates signed by them (mTLS)");
ABSL_FLAG(std::string, admin_token_file, "",
          "File holding the admin token (16 bytes or more, one line): every call must then carry "
          "'authorization: Bearer TOKEN' (ddpctl and ddp-client: --token-file or DDP_TOKEN). "
          "Unset: no authorization");
ABSL_FLAG(std::string, log_level, "info", "Minimum log level: debug, info, warning, error");
ABSL_FLAG(int64_t, max_key_bytes, 4096, "Largest key in bytes (RESOURCE_EXHAUSTED above)");
ABSL_FLAG(int64_t, max_value_bytes, 1 << 20, "Largest value in bytes (RESOURCE_EXHAUSTED above)");
ABSL_FLAG(int64_t, history_revisions, 100000,
          "Keep the watch history of the last N revisions; older ones are compacted "
          "automatically (0 keeps everything)");
ABSL_FLAG(int64_t, max_leases, 1000000, "Most leases alive at once");
ABSL_FLAG(int64_t, max_watchers, 100000, "Most watch streams open at once");
ABSL_FLAG(int64_t, watch_buffer_bytes, 4 << 20,
          "Most bytes of events one watch stream holds for a client that reads slower than "
          "they come (KV Watch, WatchJob, and their event streams). A KV watcher beyond it "
          "drops them and reads them again from the history when its client catches up; a "
          "job watcher ends with RESOURCE_EXHAUSTED naming the from_index to resume from");
ABSL_FLAG(int64_t, max_wait_calls, 100000, "Most Wait calls pending at once");
ABSL_FLAG(int64_t, default_wait_timeout_ms, 300000, "Timeout of a Wait that gives none");
ABSL_FLAG(int, session_queues, 4,
          "Agent sessions and KV watches on gRPC's async API over at least this many "
          "completion queues, each with a thread of its own (for many thousand streams: each "
          "message then costs O(streams / queues) in Debian's libgrpc instead of O(streams)); "
          "one runs until the first stream is accepted, which opens the others; more open as "
          "streams come (--session-queue-streams); each queue's thread also writes what goes to "
          "its streams, so a restart's stop orders and assignments, or a commit's watch events, "
          "go out on every queue at once; 0: sessions on the callback API (KV watches then "
          "start on one queue). 0..64");
ABSL_FLAG(int, session_queue_streams, 2048,
          "Streams (agent sessions, KV watches) per session queue; when every open queue holds "
          "this many, twice as many queues (and threads) open, up to 64, so that a message "
          "costs about the same at 65,536 streams as at 4,096; 0: exactly --session-queues "
          "queues. 0..1000000");
ABSL_FLAG(bool, heartbeat_udp, true,
          "Take agents' heartbeats over UDP as well (a few microseconds of CPU each instead of "
          "tens for a stream message; docs/operations.md, \"Heartbeats over UDP\"): each "
          "session gets a signed channel, heartbeats that carry worker states go as datagrams "
          "too, taken at their point of the stream so they keep its order, and an agent whose "
          "datagrams go unanswered heartbeats on its stream, so a blocked UDP port costs stream "
          "messages, never a lease. Open the UDP port (--heartbeat-udp-port) where the gRPC "
          "port is open; --heartbeat-udp=false keeps every heartbeat on the streams");
ABSL_FLAG(int, heartbeat_udp_port, -1,
          "UDP port of the heartbeat channel: -1, the gRPC port's number (--port; with --port 0 "
          "any free port when that number is taken for UDP); 0, any free port; else 1..65535 "
          "(agents learn it from their session)");
ABSL_FLAG(int64_t, tick_interval_ms, 50,
          "How often lease expiry and Wait deadlines are checked, in milliseconds (job "
          "timeouts are checked at least every 100 ms)");
ABSL_FLAG(int64_t, quarantine_after, 0,
          "Quarantine a node after this many incidents within --quarantine-window (its own "
          "worker failures and hangs, lost leases, failed health checks, across jobs): every "
          "job refuses it until `ddpctl nodes uncordon NODE`; 0: never. The default policy: "
          "one set through the API (`ddpctl nodes policy set`) is stored and wins");
ABSL_FLAG(std::string, quarantine_window, "1h",
          "The window of --quarantine-after, a duration of 1s..720h (e.g. 30m, 2h)");

namespace {

// The sections of --help, in order, each with its flags (every flag of this
// file belongs to one; main_help_test checks it).
struct FlagGroup {
  const char* title;
  std::vector<const char*> flags;
};
const std::vector<FlagGroup>& FlagGroups() {
  static const auto* const groups = new std::vector<FlagGroup>{
      {"Storage", {"data_dir", "store", "copy_state_to", "history_revisions"}},
      {"Network and listeners",
       {"port", "bind", "port_file", "http_port", "http_port_file", "http_max_connections",
        "http_max_connections_per_client", "http_header_timeout_ms", "heartbeat_udp",
        "heartbeat_udp_port", "session_queues", "session_queue_streams"}},
      {"TLS and authorization", {"tls_cert", "tls_key", "tls_client_ca", "admin_token_file"}},
      {"High availability (--store etcd://)", {"advertise_host", "leader_lease_ms"}},
      {"Limits and timing",
       {"max_key_bytes", "max_value_bytes", "max_leases", "max_watchers", "watch_buffer_bytes",
        "max_wait_calls", "default_wait_timeout_ms", "tick_interval_ms"}},
      {"The fleet (health ledger)", {"quarantine_after", "quarantine_window"}},
      {"Logging", {"log_level"}},
  };
  return *groups;
}

// Appends `text` to `out` wrapped at 100 columns, each line indented by
// `indent` spaces.
void AppendWrapped(const std::string& text, size_t indent, std::string* out) {
  const std::string pad(indent, ' ');
  std::string line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && pad.size() + line.size() + 1 + word.size() > 100) {
      absl::StrAppend(out, pad, line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) absl::StrAppend(out, pad, line, "\n");
}

// The --help text: the usage message, then the flags by topic with their
// defaults (the flags' own help strings: one place for each).
std::string HelpText() {
  std::string out = absl::StrCat(absl::ProgramUsageMessage(), "\n");
  for (const FlagGroup& group : FlagGroups()) {
    absl::StrAppend(&out, "\n", group.title, "\n");
    for (const char* name : group.flags) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
      if (flag == nullptr) continue;
      std::string spelled = name;
      std::replace(spelled.begin(), spelled.end(), '_', '-');
      const std::string value = flag->DefaultValue();
      absl::StrAppend(&out, "  --", spelled,
                      flag->IsOfType<bool>() ? ""
                      : value.empty()        ? " (default: none)"
                                             : absl::StrCat(" (default: ", value, ")"),
                      "\n");
      AppendWrapped(flag->Help(), 6, &out);
    }
  }
  // A flag of this file missing from FlagGroups() still shows, under a title
  // the binary test refuses.
  std::vector<std::string> ungrouped;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!absl::EndsWith(flag->Filename(), "coordinator/coordinator_command.cc")) continue;
    bool grouped = false;
    for (const FlagGroup& group : FlagGroups()) {
      for (const char* listed : group.flags) grouped = grouped || name == listed;
    }
    if (!grouped) ungrouped.emplace_back(name);
  }
  if (!ungrouped.empty()) {
    absl::StrAppend(&out, "\nUngrouped (a bug)\n  --", absl::StrJoin(ungrouped, ", --"), "\n");
  }
  absl::StrAppend(&out, "\nOther\n  --help, -h      this text\n  --version       ",
                  "the version and build mode\n");
  return out;
}

bool HasArg(const std::vector<char*>& args, std::initializer_list<absl::string_view> names) {
  for (size_t i = 1; i < args.size(); ++i) {
    const absl::string_view arg = args[i];
    if (arg == "--") break;
    for (absl::string_view name : names) {
      if (arg == name) return true;
    }
  }
  return false;
}

// Checks, before the data dir is created or gRPC starts, that every port to
// listen on is free; the error names the port, its flag and what to do.
absl::Status CheckListenPortsFree(const ddp::server::CoordinatorServerOptions& options) {
  if (options.port != 0) {
    DDP_RETURN_IF_ERROR(ddp::DiagnoseListen(options.bind_address, options.port, "gRPC", "--port"));
  }
  if (options.http.has_value() && options.http->port != 0) {
    DDP_RETURN_IF_ERROR(
        ddp::DiagnoseListen(options.bind_address, options.http->port, "HTTP", "--http-port"));
  }
  if (options.jobs.heartbeat_udp) {
    const int udp_port = options.heartbeat_udp_port < 0 ? options.port : options.heartbeat_udp_port;
    if (udp_port != 0) {
      DDP_RETURN_IF_ERROR(ddp::DiagnoseListen(options.bind_address, udp_port, "UDP heartbeats",
                                              "--heartbeat-udp-port", ddp::ListenTransport::kUdp));
    }
  }
  return absl::OkStatus();
}

int BadFlag(const std::string& message) {
  std::fprintf(stderr, "coordinator: %s (see --help)\n", message.c_str());
  return ddp::kExitBadFlags;
}

// Builds the server options from the flags; returns a non-empty error on bad
// values.
std::string OptionsFromFlags(ddp::server::CoordinatorServerOptions* options) {
  const int port = absl::GetFlag(FLAGS_port);
  if (port < 0 || port > 65535) return absl::StrCat("--port=", port, " must be 0..65535");
  options->port = port;
  int http_port = absl::GetFlag(FLAGS_http_port);
  if (http_port < -1 || http_port > 65535) {
    return absl::StrCat("--http-port=", http_port,
                        " must be -1 (any free port), 0 (off) or a port up to 65535");
  }
  const absl::CommandLineFlag* http_flag = absl::FindCommandLineFlag("http_port");
  if (port == 0 && http_flag != nullptr &&
      !absl::flags_internal::PrivateHandleAccessor::IsSpecifiedOnCommandLine(*http_flag)) {
    http_port = -1;
  }
  if (http_port != 0) {
    options->http.emplace();
    options->http->port = http_port == -1 ? 0 : http_port;
    const int64_t connections = absl::GetFlag(FLAGS_http_max_connections);
    const int64_t per_client = absl::GetFlag(FLAGS_http_max_connections_per_client);
    const int64_t header_ms = absl::GetFlag(FLAGS_http_header_timeout_ms);
    if (connections < 1 || connections > 1000000) {
      return absl::StrCat("--http-max-connections=", connections, " must be 1..1000000");
    }
    if (per_client < 1 || per_client > connections) {
      return absl::StrCat("--http-max-connections-per-client=", per_client,
                          " must be 1..--http-max-connections (", connections, ")");
    }
    if (header_ms < 100 || header_ms > 600000) {
      return absl::StrCat("--http-header-timeout-ms=", header_ms, " must be 100..600000");
    }
    options->http->gate.max_connections = static_cast<size_t>(connections);
    options->http->gate.max_connections_per_client = static_cast<size_t>(per_client);
    options->http->gate.header_timeout = absl::Milliseconds(header_ms);
  } else if (!absl::GetFlag(FLAGS_http_port_file).empty()) {
    return "--http-port-file needs HTTP on (--http-port is 0)";
  }
  options->data_dir = absl::GetFlag(FLAGS_data_dir);
  if (options->data_dir.empty()) return "--data-dir must not be empty";
  options->store = absl::GetFlag(FLAGS_store);
  if (!options->store.empty()) {
    absl::StatusOr<ddp::storage::EtcdStoreSpec> spec =
        ddp::storage::ParseEtcdStoreSpec(options->store);
    if (!spec.ok()) return std::string(spec.status().message());
  } else if (!absl::GetFlag(FLAGS_advertise_host).empty()) {
    return "--advertise-host needs --store etcd://... (it names the leader to the standbys)";
  }
  const std::string copy_to = absl::GetFlag(FLAGS_copy_state_to);
  if (!copy_to.empty()) {
    if (!options->store.empty()) {
      return "--copy-state-to copies the SQLite state of --data-dir: give it without --store";
    }
    absl::StatusOr<ddp::storage::EtcdStoreSpec> spec = ddp::storage::ParseEtcdStoreSpec(copy_to);
    if (!spec.ok()) {
      return absl::StrCat("--copy-state-to: ", spec.status().message());
    }
  }
  const int64_t lease_ms = absl::GetFlag(FLAGS_leader_lease_ms);
  if (lease_ms < 1000 || lease_ms > 600000) {
    return absl::StrCat("--leader-lease-ms=", lease_ms, " must be 1000..600000");
  }
  options->tls = ddp::TlsServerFiles{absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                                     absl::GetFlag(FLAGS_tls_client_ca)};
  if (absl::Status tls = ddp::CheckTlsServerFiles(options->tls); !tls.ok()) {
    return std::string(tls.message());
  }
  if (const std::string path = absl::GetFlag(FLAGS_admin_token_file); !path.empty()) {
    absl::StatusOr<std::string> token = ddp::ReadTokenFile("--admin-token-file", path);
    if (!token.ok()) return std::string(token.status().message());
    options->admin_token = *std::move(token);
  }
  // No authorization: only this machine, unless --bind says otherwise.
  const absl::CommandLineFlag* bind_flag = absl::FindCommandLineFlag("bind");
  if (bind_flag != nullptr &&
      absl::flags_internal::PrivateHandleAccessor::IsSpecifiedOnCommandLine(*bind_flag)) {
    options->bind_address = absl::GetFlag(FLAGS_bind);
    if (options->bind_address.empty()) return "--bind must not be empty";
  } else {
    options->bind_address = options->admin_token.empty() ? "127.0.0.1" : "0.0.0.0";
  }
  ddp::kv::KvLimits& limits = options->kv.limits;
  const int64_t key_bytes = absl::GetFlag(FLAGS_max_key_bytes);
  if (key_bytes < 1 || key_bytes > (1 << 20)) {
    return absl::StrCat("--max-key-bytes=", key_bytes, " must be 1..1048576");
  }
  limits.max_key_bytes = key_bytes;
  const int64_t value_bytes = absl::GetFlag(FLAGS_max_value_bytes);
  if (value_bytes < 0 || value_bytes > (256 << 20)) {
    return absl::StrCat("--max-value-bytes=", value_bytes, " must be 0..268435456");
  }
  limits.max_value_bytes = value_bytes;
  const int64_t history = absl::GetFlag(FLAGS_history_revisions);
  if (history < 0) return absl::StrCat("--history-revisions=", history, " must be >= 0");
  options->kv.history_revisions = history;
  const int64_t leases = absl::GetFlag(FLAGS_max_leases);
  if (leases < 1) return absl::StrCat("--max-leases=", leases, " must be >= 1");
  limits.max_leases = leases;
  const int64_t watchers = absl::GetFlag(FLAGS_max_watchers);
  if (watchers < 1) return absl::StrCat("--max-watchers=", watchers, " must be >= 1");
  limits.max_watchers = watchers;
  const int64_t watch_bytes = absl::GetFlag(FLAGS_watch_buffer_bytes);
  if (watch_bytes < (64 << 10) || watch_bytes > (int64_t{1} << 34)) {
    return absl::StrCat("--watch-buffer-bytes=", watch_bytes, " must be 65536..17179869184");
  }
  options->kv.watch.max_queued_bytes = static_cast<size_t>(watch_bytes);
  options->jobs.jobs.watch_buffer_bytes = static_cast<size_t>(watch_bytes);
  const int64_t waits = absl::GetFlag(FLAGS_max_wait_calls);
  if (waits < 1) return absl::StrCat("--max-wait-calls=", waits, " must be >= 1");
  limits.max_pending_wait_calls = waits;
  const int64_t wait_ms = absl::GetFlag(FLAGS_default_wait_timeout_ms);
  if (wait_ms < 1 || absl::Milliseconds(wait_ms) > limits.max_wait_timeout) {
    return absl::StrCat("--default-wait-timeout-ms=", wait_ms, " must be 1..",
                        absl::ToInt64Milliseconds(limits.max_wait_timeout));
  }
  limits.default_wait_timeout = absl::Milliseconds(wait_ms);
  const int64_t tick_ms = absl::GetFlag(FLAGS_tick_interval_ms);
  if (tick_ms < 1 || tick_ms > 10000) {
    return absl::StrCat("--tick-interval-ms=", tick_ms, " must be 1..10000");
  }
  options->kv_tick_interval = absl::Milliseconds(tick_ms);
  const int queues = absl::GetFlag(FLAGS_session_queues);
  if (queues < 0 || queues > 64) {
    return absl::StrCat("--session-queues=", queues, " must be 0..64");
  }
  options->jobs.session.completion_queues = queues;
  const int queue_streams = absl::GetFlag(FLAGS_session_queue_streams);
  if (queue_streams < 0 || queue_streams > 1000000) {
    return absl::StrCat("--session-queue-streams=", queue_streams, " must be 0..1000000");
  }
  options->jobs.session.streams_per_completion_queue = queue_streams;
  options->jobs.heartbeat_udp = absl::GetFlag(FLAGS_heartbeat_udp);
  const int udp_port = absl::GetFlag(FLAGS_heartbeat_udp_port);
  if (udp_port < -1 || udp_port > 65535) {
    return absl::StrCat("--heartbeat-udp-port=", udp_port,
                        " must be -1 (the gRPC port's number), 0 (any free port) or 1..65535");
  }
  options->heartbeat_udp_port = udp_port;
  const int64_t quarantine_after = absl::GetFlag(FLAGS_quarantine_after);
  if (quarantine_after < 0 || quarantine_after > 1'000'000) {
    return absl::StrCat("--quarantine-after=", quarantine_after, " must be 0 (never) to 1000000");
  }
  options->fleet.quarantine.after = static_cast<int>(quarantine_after);
  const std::string window = absl::GetFlag(FLAGS_quarantine_window);
  if (!absl::ParseDuration(window, &options->fleet.quarantine.window)) {
    return absl::StrCat("--quarantine-window=", window, " is not a duration (e.g. 30m, 2h)");
  }
  if (absl::Status policy = ddp::fleet::ValidateQuarantinePolicy(options->fleet.quarantine);
      !policy.ok()) {
    return absl::StrCat("--", policy.message());
  }
  return "";
}

bool WritePortFile(const std::string& path, int port) {
  const std::string temp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(temp, std::ios::trunc);
    out << port << "\n";
    out.close();
    if (!out) return false;
  }
  return std::rename(temp.c_str(), path.c_str()) == 0;
}

// Abseil exits with status 1 on an unknown flag or a malformed value; this
// check runs first so that every bad flag exits with 2 and a message naming it.
std::string PrecheckFlags(const std::vector<char*>& args) {
  static const char* const kBuiltin[] = {
      "help",     "helpfull", "helpshort",  "helppackage", "version", "only_check_args",
      "flagfile", "fromenv",  "tryfromenv", "undefok"};
  for (size_t i = 1; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    arg = arg.substr(arg[1] == '-' ? 2 : 1);
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    if (std::find(std::begin(kBuiltin), std::end(kBuiltin), name) != std::end(kBuiltin)) {
      continue;
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && name.rfind("no", 0) == 0) {
      absl::CommandLineFlag* negated = absl::FindCommandLineFlag(name.substr(2));
      if (negated != nullptr && negated->IsOfType<bool>() && eq == std::string::npos) continue;
    }
    if (flag == nullptr) return absl::StrCat("unknown flag --", name);
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (flag->IsOfType<bool>()) {
      continue;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::StrCat("flag --", name, " needs a value");
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::StrCat("--", name, "=", value, ": ", error);
    }
  }
  return "";
}

// malloc_trim after bursts; logs what it returned when it was a lot.
void ReturnFreedMemory() {
  const absl::StatusOr<int64_t> before = ddp::ReadProcessRssBytes(getpid());
  malloc_trim(0);
  const absl::StatusOr<int64_t> after = ddp::ReadProcessRssBytes(getpid());
  if (before.ok() && after.ok() && *before - *after > (64 << 20)) {
    DDP_LOG(INFO) << "returned " << (*before - *after) / (1 << 20)
                  << " MiB of freed memory to the system (resident now " << *after / (1 << 20)
                  << " MiB)";
  }
}

// --copy-state-to: one copy, a summary line, an exit code.
int CopyStateAndExit(const std::string& data_dir, const std::string& store) {
  DDP_LOG(INFO) << "copying the state of " << data_dir << " into " << store;
  absl::StatusOr<ddp::storage::StateCopySummary> copied =
      ddp::server::CopyDataDirToStore(data_dir, store);
  if (!copied.ok()) {
    DDP_LOG(ERROR) << "copy failed: " << copied.status()
                   << (copied.status().code() == absl::StatusCode::kUnknown
                           ? " (the outcome is unknown: run the same command again; it "
                             "finishes the copy or says the prefix is not empty)"
                           : "");
    return ddp::ExitCodeForStartError(copied.status());
  }
  if (copied->finished_earlier_copy) {
    DDP_LOG(INFO) << "the state was already in " << store
                  << " (an earlier copy stopped before its last step): finished";
  }
  DDP_LOG(INFO) << "copied revision " << copied->revision << ": " << copied->keys << " keys, "
                << copied->leases << " leases, " << copied->jobs << " jobs (" << copied->nodes
                << " nodes, " << copied->past_runs << " past runs); start the coordinators "
                << "with --store " << store;
  return ddp::kExitOk;
}

}  // namespace

namespace ddp {

int RunCoordinatorCommand(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "The ddp-coordinator server: a durable, strongly consistent key-value "
      "store and "
      "coordination service for multi-node training.\n\n"
      "  coordinator                      # 127.0.0.1:29400, state in ./ddp-coordinator-data\n"
      "  coordinator --admin-token-file /etc/ddp/token --data-dir /var/lib/ddp-coordinator"
      "   # a service: all interfaces, authorization on\n"
      "  coordinator --port 0 --port-file /tmp/port --data-dir /tmp/d   # tests, tools\n\n"
      "Flags may be spelled with '-' or '_'. Exit codes: 0 clean shutdown "
      "(SIGINT/SIGTERM) or --help, 1 runtime failure (e.g. data dir locked), "
      "2 bad flags, 3 data error (a database of the data dir is missing, empty, "
      "foreign or corrupt: the message names it), 4 address in use (a port "
      "of --port, --http-port or --heartbeat-udp-port is taken: checked before anything "
      "else, one line names it), 5 lost the "
      "leadership (--store etcd://: the etcd lease ran out; start it again to stand by).");
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "coordinator/coordinator_command.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [] { return ddp::VersionLine("coordinator") + "\n"; };
  absl::SetFlagsUsageConfig(usage);
  std::vector<std::string> storage;
  std::vector<char*> args = ddp::NormalizeFlagNames(argc, argv, &storage);
  if (HasArg(args, {"-h", "--help", "-help", "--helpfull", "--helpshort"})) {
    std::cout << HelpText();
    return ddp::kExitOk;
  }
  if (HasArg(args, {"--version", "-version"})) {
    std::cout << ddp::VersionLine("coordinator") << "\n";
    return ddp::kExitOk;
  }
  if (std::string error = PrecheckFlags(args); !error.empty()) return BadFlag(error);
  std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (positional.size() > 1) {
    return BadFlag(absl::StrCat("unexpected argument '", positional[1], "'"));
  }
  ddp::LogLevel level;
  if (!ddp::ParseLogLevel(absl::GetFlag(FLAGS_log_level), &level)) {
    return BadFlag(absl::StrCat("--log-level=", absl::GetFlag(FLAGS_log_level),
                                " must be debug, info, warning or error"));
  }
  ddp::SetMinLogLevel(level);
  // Debian's Abseil is built with deadlock detection on; it costs a graph
  // update on every lock of every absl::Mutex (gRPC's included). Tests keep it
  // on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  ddp::server::CoordinatorServerOptions options;
  if (std::string error = OptionsFromFlags(&options); !error.empty()) return BadFlag(error);

  if (const std::string copy_to = absl::GetFlag(FLAGS_copy_state_to); !copy_to.empty()) {
    return CopyStateAndExit(options.data_dir, copy_to);
  }
  if (absl::Status ports = CheckListenPortsFree(options); !ports.ok()) {
    std::fprintf(stderr, "coordinator: %s\n", std::string(ports.message()).c_str());
    return ddp::ExitCodeForStartError(ports);
  }
  if (const absl::CommandLineFlag* bind = absl::FindCommandLineFlag("bind");
      bind != nullptr &&
      !absl::flags_internal::PrivateHandleAccessor::IsSpecifiedOnCommandLine(*bind) &&
      options.admin_token.empty()) {
    DDP_LOG(INFO) << "listening on 127.0.0.1 only: no --admin-token-file, so no authorization; "
                     "give --admin-token-file (or --bind ADDRESS) to serve other machines";
  }

  // Block the shutdown signals in every thread (threads inherit the mask); this
  // thread takes them with sigwait, so no work happens in a signal handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const ddp::server::ConnectionCapacity capacity = ddp::server::InstallConnectionGuard({});
  DDP_LOG(INFO) << "descriptor limit " << capacity.fd_limit << ": accepting up to about "
                << capacity.max_connections
                << " connections (the rest of the limit is kept for files and pipes)"
                << (ddp::server::ConnectionGuardActive()
                        ? ""
                        : "; WARNING: the accept guard is not active, a connection flood "
                          "that exhausts descriptors may stop the listener");
  // The SQLite coordinator, or one of the coordinators on an etcd prefix.
  std::unique_ptr<ddp::server::CoordinatorServer> single;
  std::unique_ptr<ddp::server::HaCoordinator> ha;
  int port = 0, http_port = 0;
  if (options.store.empty()) {
    auto server = ddp::server::CoordinatorServer::Start(options);
    if (!server.ok()) {
      DDP_LOG(ERROR) << "cannot start: " << server.status();
      return ddp::ExitCodeForStartError(server.status());
    }
    single = *std::move(server);
    port = single->port();
    http_port = single->http_port();
  } else {
    ddp::server::HaCoordinatorOptions ha_options;
    ha_options.server = options;
    ha_options.advertise_host = absl::GetFlag(FLAGS_advertise_host);
    ha_options.leader_lease = absl::Milliseconds(absl::GetFlag(FLAGS_leader_lease_ms));
    ha_options.on_fatal = [](const absl::Status& why) {
      DDP_LOG(ERROR) << "stopping at once: " << why.message()
                     << " (exit 5; started again, this coordinator stands by)";
      std::fflush(nullptr);
      std::_Exit(ddp::kExitLostLeadership);
    };
    auto server = ddp::server::HaCoordinator::Start(std::move(ha_options));
    if (!server.ok()) {
      DDP_LOG(ERROR) << "cannot start: " << server.status();
      return ddp::ExitCodeForStartError(server.status());
    }
    ha = *std::move(server);
    port = ha->port();
    http_port = ha->http_port();
  }
  auto shutdown = [&] {
    if (single != nullptr) single->Shutdown();
    if (ha != nullptr) ha->Shutdown();
  };
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty() && !WritePortFile(port_file, port)) {
    DDP_LOG(ERROR) << "cannot write --port-file " << port_file;
    shutdown();
    return ddp::kExitFailure;
  }
  const std::string http_port_file = absl::GetFlag(FLAGS_http_port_file);
  if (!http_port_file.empty() && !WritePortFile(http_port_file, http_port)) {
    DDP_LOG(ERROR) << "cannot write --http-port-file " << http_port_file;
    shutdown();
    return ddp::kExitFailure;
  }
  // Wait for SIGINT/SIGTERM; meanwhile hand memory freed after bursts (a
  // connection flood, a large range) back to the system every 30 s.
  int signal_number = -1;
  const timespec trim_period{30, 0};
  while (signal_number < 0) {
    signal_number = sigtimedwait(&signals, nullptr, &trim_period);
    if (signal_number < 0 && errno == EAGAIN) ReturnFreedMemory();
  }
  DDP_LOG(INFO) << "received " << (signal_number == SIGINT ? "SIGINT" : "SIGTERM")
                << "; shutting down";
  shutdown();
  return ddp::kExitOk;
}

}  // namespace ddp
