#include "client/launch_options.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/launch_flag_values.h"
#include "common/status_macros.h"
#include "common/token_file.h"

namespace ddp::client {
namespace {

using launch_flags::BadValue;
using launch_flags::kMaxNodes;
using launch_flags::kMaxProcsPerNode;
using launch_flags::kMaxRestarts;
using launch_flags::kMinHangTimeout;
using launch_flags::ParseBool;
using launch_flags::ParseDuration;
using launch_flags::ParseEndpoint;
using launch_flags::ParseId;
using launch_flags::ParseInt;
using launch_flags::ParseModuleList;
using launch_flags::ParseNnodes;
using launch_flags::ParseNonBlank;
using launch_flags::ParseNproc;
using launch_flags::ParseRankList;
using launch_flags::ParseRdzvConf;
using launch_flags::Shown;

std::string RandomJobId(absl::string_view kind = "standalone") {
  std::random_device device;
  std::mt19937_64 rng((static_cast<uint64_t>(device()) << 32) ^ device());
  return absl::StrCat(kind, "-", absl::Hex(rng(), absl::kZeroPad16));
}

// torch.distributed.launch's static form: --master-addr/--master-port on every
// node and no coordinator given. The coordinator is at MASTER_ADDR:port+1
// (the agent on that host serves it), group ranks follow --node-rank, the
// workers get the user's MASTER_ADDR/MASTER_PORT, and the job id is derived
// from the master endpoint (torch.distributed.launch has none).
absl::Status ApplyStaticForm(LaunchOptions* o, bool coordinator_given) {
  if (o->master_addr.empty() && !o->master_port) return absl::OkStatus();
  if (coordinator_given || o->rdzv_backend == "c10d" || o->standalone) {
    o->notes.push_back(
        "--master-addr/--master-port: MASTER_ADDR/MASTER_PORT come from the "
        "coordinator; these flags are used only without one");
    o->master_addr.clear();
    o->master_port.reset();
    return absl::OkStatus();
  }
  if (o->master_addr.empty()) o->master_addr = "127.0.0.1";  // torch.distributed.launch's
  if (!o->master_port) o->master_port = 29500;
  if (o->max_nodes > 1 && !o->node_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("--master-addr/--master-port with --nnodes ", o->max_nodes,
                     " needs --node-rank on each node (0 on the master ", o->master_addr, ")"));
  }
  o->static_form = true;
  // torch.distributed.launch passes --local_rank=N to the script unless
  // --use_env (torchrun's forms never do).
  if (!o->use_env_given) o->use_env = false;
  // The node rank identifies the node: two "nodes" of one host (the usual way
  // to try multi-node) must not share the hostname as their id.
  if (!o->node_id_given && o->node_rank) {
    o->node_id = absl::StrCat(o->node_id, "-node-rank-", *o->node_rank);
  }
  o->coordinator = absl::StrCat(o->master_addr.find(':') != std::string::npos
                                    ? absl::StrCat("[", o->master_addr, "]")
                                    : o->master_addr,
                                ":", *o->master_port + 1);
  if (o->job_id.empty()) {
    o->job_id = absl::StrCat("static-", o->master_addr, "-", *o->master_port);
    std::replace_if(
        o->job_id.begin(), o->job_id.end(),
        [](char c) { return !absl::ascii_isalnum(c) && c != '.' && c != '-'; }, '-');
  }
  return absl::OkStatus();
}

// The job id when no --rdzv-id/--job/PET_RDZV_ID was given (see
// LaunchOptions::job_id).
absl::Status ResolveJobId(const std::function<std::optional<std::string>(const std::string&)>& env,
                          LaunchOptions* o) {
  if (!o->job_id.empty() || o->standalone) return absl::OkStatus();
  for (const char* name : {"TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "LSB_JOBID", "PBS_JOBID"}) {
    std::optional<std::string> value = env(name);
    if (!value || value->empty()) continue;
    const std::string what = absl::StrCat("$", name);
    if (absl::Status s = ParseId(what, *value, &o->job_id); !s.ok()) return s;
    o->notes.push_back(absl::StrCat("job id ", o->job_id, " from ", what));
    return absl::OkStatus();
  }
  if (o->max_nodes > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no job id for a run of up to ", o->max_nodes,
        " nodes: give every node the same --rdzv-id (or PET_RDZV_ID); without one, unrelated "
        "jobs would join each other"));
  }
  o->job_id = RandomJobId("run");
  o->notes.push_back(absl::StrCat("no --rdzv-id: single-node job id ", o->job_id));
  return absl::OkStatus();
}

// One command-line flag: its spellings, whether it takes a value, and how it
// applies.
struct Flag {
  std::vector<std::string> names;  // canonical long spelling first ("--nproc-per-node")
  bool takes_value;
  std::string env;  // PET_ variable that supplies a default, or empty
  std::function<absl::Status(const std::string& flag, const std::string& value,
                             const HostInfo& host, LaunchOptions* o)>
      apply;
};

const std::vector<Flag>& Flags() {
  using V = const std::string&;
  using H = const HostInfo&;
  using O = LaunchOptions*;
  static const auto* flags = new std::vector<Flag>{
      {{"--nnodes"}, true, "PET_NNODES", [](V f, V v, H, O o) { return ParseNnodes(f, v, o); }},
      {{"--nproc-per-node"},
       true,
       "PET_NPROC_PER_NODE",
       [](V f, V v, H h, O o) { return ParseNproc(f, v, h, o); }},
      {{"--max-restarts"},
       true,
       "PET_MAX_RESTARTS",
       [](V f, V v, H, O o) { return ParseInt(f, v, 0, kMaxRestarts, &o->max_restarts); }},
      {{"--monitor-interval"},
       true,
       "PET_MONITOR_INTERVAL",
       [](V f, V v, H, O o) { return ParseDuration(f, v, false, &o->monitor_interval); }},
      {{"--rdzv-id", "--job"},
       true,
       "PET_RDZV_ID",
       [](V f, V v, H, O o) { return ParseId(f, v, &o->job_id); }},
      {{"--rdzv-endpoint", "--coordinator"},
       true,
       "PET_RDZV_ENDPOINT",
       [](V f, V v, H, O o) {
         o->coordinator_given = true;
         return ParseEndpoint(f, v, &o->coordinator);
       }},
      {{"--rdzv-conf"},
       true,
       "PET_RDZV_CONF",
       [](V f, V v, H, O o) { return ParseRdzvConf(f, v, &o->rdzv_conf); }},
      {{"--rdzv-backend"},
       true,
       "PET_RDZV_BACKEND",
       [](V f, V v, H, O o) {
         // torchrun's backends: c10d (and its experimental alias) is served
         // as the job's coordinator at --rdzv-endpoint; the others need
         // services ddp-client does not speak to.
         if (v == "c10d" || v == "c10d-experimental") {
           o->rdzv_backend = "c10d";
           return absl::OkStatus();
         }
         if (v == "etcd" || v == "etcd-v2") {
           return BadValue(f, v,
                           "c10d: ddp-client does not use etcd; point --rdzv-endpoint at a "
                           "ddp coordinator, or give every node --rdzv-backend c10d "
                           "--rdzv-endpoint HEAD:PORT and nothing else");
         }
         if (v == "static") {
           return BadValue(f, v,
                           "c10d, or no --rdzv-backend with --master-addr/--master-port and "
                           "--node-rank on each node (torch.distributed.launch's static form)");
         }
         return BadValue(f, v, "c10d (or a coordinator at --rdzv-endpoint)");
       }},
      {{"--standalone"},
       false,
       "PET_STANDALONE",
       [](V f, V v, H, O o) { return ParseBool(f, v, &o->standalone); }},
      {{"--role"},
       true,
       "PET_ROLE",
       [](V f, V v, H, O o) { return ParseNonBlank(f, v, 64, &o->role); }},
      {{"--module", "-m"},
       false,
       "PET_MODULE",
       [](V f, V v, H, O o) { return ParseBool(f, v, &o->module); }},
      {{"--no-python"},
       false,
       "PET_NO_PYTHON",
       [](V f, V v, H, O o) { return ParseBool(f, v, &o->no_python); }},
      {{"--run-path"},
       false,
       "PET_RUN_PATH",
       [](V f, V v, H, O o) { return ParseBool(f, v, &o->run_path); }},
      {{"--local-rank-spelling"},
       true,
       "",
       [](V f, V v, H, O o) {
         if (v == "underscore") {
           o->local_rank_arg = "--local_rank";
         } else if (v == "dash") {
           o->local_rank_arg = "--local-rank";
         } else {
           return BadValue(f, v, "underscore (--local_rank=N) or dash (--local-rank=N)");
         }
         return absl::OkStatus();
       }},
      {{"--use-env"},
       false,
       "",
       [](V f, V v, H, O o) {
         o->use_env_given = true;
         return ParseBool(f, v, &o->use_env);
       }},
      {{"--log-dir"},
       true,
       "PET_LOG_DIR",
       [](V f, V v, H, O o) { return ParseNonBlank(f, v, PATH_MAX, &o->log_dir); }},
      {{"--redirects", "-r"},
       true,
       "PET_REDIRECTS",
       [](V f, V v, H, O o) {
         auto spec = StdSpec::Parse(v);
         if (!spec.ok())
           return absl::InvalidArgumentError(absl::StrCat(f, ": ", spec.status().message()));
         o->redirects = *spec;
         return absl::OkStatus();
       }},
      {{"--tee", "-t"},
       true,
       "PET_TEE",
       [](V f, V v, H, O o) {
         auto spec = StdSpec::Parse(v);
         if (!spec.ok())
           return absl::InvalidArgumentError(absl::StrCat(f, ": ", spec.status().message()));
         o->tee = *spec;
         return absl::OkStatus();
       }},
      {{"--local-ranks-filter"},
       true,
       "PET_LOCAL_RANKS_FILTER",
       [](V f, V v, H, O o) { return ParseRankList(f, v, &o->local_ranks_filter); }},
      {{"--health-check"},
       true,
       "",
       [](V f, V v, H, O o) {
         if (o->health_checks.size() >= kMaxHealthChecks) {
           return absl::InvalidArgumentError(absl::StrCat(f, " given more than ", kMaxHealthChecks,
                                                          " times; at most ", kMaxHealthChecks));
         }
         absl::StatusOr<HealthCheckSpec> spec =
             ParseHealthCheck(f, v, static_cast<int>(o->health_checks.size()) + 1);
         if (!spec.ok()) return spec.status();
         o->health_checks.push_back(*std::move(spec));
         return absl::OkStatus();
       }},
      {{"--prewarm"},
       true,
       "DDP_PREWARM",
       [](V f, V v, H, O o) { return ParseModuleList(f, v, &o->prewarm); }},
      {{"--in-process-restart"},
       false,
       "DDP_IN_PROCESS_RESTART",
       [](V f, V v, H, O o) { return ParseBool(f, v, &o->in_process_restart); }},
      {{"--in-process-restart-timeout"},
       true,
       "",
       [](V f, V v, H, O o) { return ParseDuration(f, v, false, &o->in_process_restart_timeout); }},
      {{"--local-addr"},
       true,
       "PET_LOCAL_ADDR",
       [](V f, V v, H, O o) { return ParseNonBlank(f, v, 255, &o->local_addr); }},
      {{"--node-rank"},
       true,
       "PET_NODE_RANK",
       [](V f, V v, H, O o) {
         int rank = 0;
         absl::Status s = ParseInt(f, v, 0, kMaxNodes - 1, &rank);
         if (s.ok()) o->node_rank = rank;
         return s;
       }},
      {{"--node-id"},
       true,
       "",
       [](V f, V v, H, O o) {
         o->node_id_given = true;
         return ParseNonBlank(f, v, 255, &o->node_id);
       }},
      {{"--worker-heartbeat-timeout"},
       true,
       "",
       [](V f, V v, H, O o) { return ParseDuration(f, v, true, &o->worker_heartbeat_timeout); }},
      {{"--hang-timeout"},
       true,
       "",
       [](V f, V v, H, O o) {
         DDP_RETURN_IF_ERROR(ParseDuration(f, v, true, &o->hang_timeout));
         // Activity is sampled once a second: a shorter timeout would take
         // one quiet sample for a hang.
         if (o->hang_timeout != absl::ZeroDuration() && o->hang_timeout < kMinHangTimeout) {
           return BadValue(
               f, v,
               absl::StrCat("0 (off), or at least ", absl::FormatDuration(kMinHangTimeout),
                            " (activity is sampled every second)"));
         }
         return absl::OkStatus();
       }},
      {{"--progress-interval"},
       true,
       "",
       [](V f, V v, H, O o) { return ParseDuration(f, v, false, &o->progress_interval); }},
      {{"--shutdown-timeout"},
       true,
       "",
       [](V f, V v, H, O o) { return ParseDuration(f, v, false, &o->shutdown_timeout); }},
      {{"--preemption-grace"},
       true,
       "DDP_PREEMPTION_GRACE",
       [](V f, V v, H, O o) { return ParseDuration(f, v, true, &o->preemption_grace); }},
      {{"--preemption-notice-file"},
       true,
       "DDP_PREEMPTION_NOTICE_PATH",
       [](V f, V v, H, O o) { return ParseNonBlank(f, v, PATH_MAX, &o->preemption_notice_file); }},
      {{"--straggler-exclude-factor"},
       true,
       "",
       [](V f, V v, H, O o) {
         double factor = 0;
         if (!absl::SimpleAtod(v, &factor) || !(factor == 0 || (factor >= 1.1 && factor <= 100))) {
           return absl::InvalidArgumentError(
               absl::StrCat(f, "=", v,
                            " must be 0 (off) or a number in [1.1, 100] (how many times slower "
                            "than the median a rank may be)"));
         }
         o->straggler_exclude_factor = factor;
         return absl::OkStatus();
       }},
      {{"--straggler-exclude-after"},
       true,
       "",
       [](V f, V v, H, O o) { return ParseDuration(f, v, false, &o->straggler_exclude_after); }},
      {{"--connect-timeout"},
       true,
       "",
       [](V f, V v, H, O o) { return ParseDuration(f, v, false, &o->connect_timeout); }},
      {{"--tls-ca"},
       true,
       "DDP_TLS_CA",
       [](V f, V v, H, O o) { return ParseNonBlank(f, v, 4096, &o->tls.ca); }},
      {{"--tls-cert"},
       true,
       "DDP_TLS_CERT",
       [](V f, V v, H, O o) { return ParseNonBlank(f, v, 4096, &o->tls.cert); }},
      {{"--tls-key"},
       true,
       "DDP_TLS_KEY",
       [](V f, V v, H, O o) { return ParseNonBlank(f, v, 4096, &o->tls.key); }},
      {{"--token-file"},
       true,
       "",
       [](V f, V v, H, O o) -> absl::Status {
         DDP_ASSIGN_OR_RETURN(std::string token, ReadTokenFile(f, std::string(v)));
         o->token = std::move(token);
         return absl::OkStatus();
       }},
      // torchrun flags that have no meaning with a coordinator: accepted,
      // noted, ignored.
      {{"--master-addr"},
       true,
       "PET_MASTER_ADDR",
       [](V f, V v, H, O o) { return ParseNonBlank(f, v, 255, &o->master_addr); }},
      {{"--master-port"},
       true,
       "PET_MASTER_PORT",
       [](V f, V v, H, O o) {
         int port = 0;
         // port+1 is the coordinator's in the static form.
         absl::Status s = ParseInt(f, v, 1, 65534, &port);
         if (s.ok()) o->master_port = port;
         return s;
       }},
      {{"--start-method"},
       true,
       "",
       [](V f, V v, H, O o) {
         if (v != "spawn" && v != "fork" && v != "forkserver") {
           return BadValue(f, v, "spawn, fork or forkserver");
         }
         o->notes.push_back(absl::StrCat(f, " ignored: workers are always fork+exec'ed"));
         return absl::OkStatus();
       }},
      {{"--help", "-h"}, false, "", [](V f, V v, H, O o) { return ParseBool(f, v, &o->help); }},
  };
  return *flags;
}

// "--nproc_per_node" -> "--nproc-per-node"; short flags unchanged.
std::string NormalizeName(absl::string_view name) {
  if (!absl::StartsWith(name, "--")) return std::string(name);
  return absl::StrCat("--", absl::StrReplaceAll(name.substr(2), {{"_", "-"}}));
}

// Exact spelling first; else, as argparse does for torchrun, an unambiguous
// prefix of a long flag ("--nproc" for "--nproc-per-node").
absl::StatusOr<const Flag*> FindFlag(const std::string& name) {
  for (const Flag& flag : Flags()) {
    for (const std::string& spelling : flag.names) {
      if (spelling == name) return &flag;
    }
  }
  std::vector<std::string> candidates;
  const Flag* found = nullptr;
  if (absl::StartsWith(name, "--") && name.size() > 2) {
    for (const Flag& flag : Flags()) {
      for (const std::string& spelling : flag.names) {
        if (absl::StartsWith(spelling, "--") && absl::StartsWith(spelling, name)) {
          if (found != &flag) candidates.push_back(spelling);
          found = &flag;
        }
      }
    }
  }
  if (candidates.size() == 1) return found;
  if (candidates.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("ambiguous flag '", Shown(name), "' could be ",
                                                   absl::StrJoin(candidates, ", "),
                                                   "; spell it out"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown flag '", Shown(name), "'; run ddp-client --help for the list"));
}

}  // namespace

absl::StatusOr<LaunchOptions> ParseLaunchOptions(const std::vector<std::string>& args,
                                                 const HostInfo& host) {
  LaunchOptions o;
  o.node_id = host.hostname.empty() ? "localhost" : host.hostname;
  auto env = [&](const std::string& name) -> std::optional<std::string> {
    return host.getenv ? host.getenv(name) : std::nullopt;
  };
  if (auto python = env("PYTHON_EXEC"); python && !python->empty()) o.python_exec = *python;
  if (auto coord = env("DDP_COORDINATOR"); coord && !coord->empty()) {
    o.coordinator_given = true;
    DDP_RETURN_IF_ERROR(ParseEndpoint("$DDP_COORDINATOR", *coord, &o.coordinator));
  }
  // Defaults from PET_* (torchrun's argparse `env` action), before the command
  // line.
  for (const Flag& flag : Flags()) {
    if (flag.env.empty()) continue;
    std::optional<std::string> value = env(flag.env);
    if (!value) continue;
    DDP_RETURN_IF_ERROR(flag.apply("$" + flag.env, *value, host, &o));
  }

  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the entry point
    std::string name = arg;
    std::optional<std::string> value;
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (arg[1] != '-' && arg.size() > 2) {  // -r3, -t0:1
      name = arg.substr(0, 2);
      value = arg.substr(2);
    }
    name = NormalizeName(name);
    DDP_ASSIGN_OR_RETURN(const Flag* found, FindFlag(name));
    const Flag* flag = found;
    if (flag->takes_value && !value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat(name, " needs a value"));
      }
      value = args[++i];
    }
    DDP_RETURN_IF_ERROR(flag->apply(flag->names[0], value.value_or("true"), host, &o));
  }
  if (o.help) return o;
  if (i >= args.size()) {
    return absl::InvalidArgumentError(
        "missing ENTRYPOINT: usage is ddp-client [flags] "
        "SCRIPT.py|EXECUTABLE|-m MODULE "
        "[script args...]");
  }
  if (args[i].empty()) {
    // Found by tests/fuzz:command_line_fuzz: `ddp-client ""` was accepted and
    // failed only when every worker tried to run it.
    return absl::InvalidArgumentError(
        "ENTRYPOINT is an empty string: give the training script, an executable or -m MODULE");
  }
  o.entrypoint = args[i];
  o.script_args.assign(args.begin() + i + 1, args.end());

  if (o.run_path) {
    // torchrun: runs the script through Python (runpy.run_path); takes
    // precedence over --no-python.
    o.no_python = false;
  }
  if (o.rdzv_conf.last_call_timeout && o.rdzv_conf.join_timeout &&
      *o.rdzv_conf.last_call_timeout > *o.rdzv_conf.join_timeout) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv-conf last_call_timeout=", absl::FormatDuration(*o.rdzv_conf.last_call_timeout),
        " exceeds join_timeout=", absl::FormatDuration(*o.rdzv_conf.join_timeout),
        ": the last call must end within the join timeout"));
  }
  if (o.module && o.no_python) {
    return absl::InvalidArgumentError(
        "--module and --no-python cannot be used together: a module needs the "
        "interpreter");
  }
  if (!o.prewarm.empty() && o.no_python) {
    return absl::InvalidArgumentError(
        "--prewarm keeps Python interpreters ready, but --no-python runs ENTRYPOINT without "
        "one: drop one of the two");
  }
  if (o.rdzv_conf.shutdown_timeout) o.shutdown_timeout = *o.rdzv_conf.shutdown_timeout;
  if (o.rdzv_backend == "c10d" && o.coordinator.find(',') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv-backend c10d serves one endpoint on its host, but --rdzv-endpoint names several (",
        o.coordinator, "); for coordinators in HA drop --rdzv-backend"));
  }
  if (absl::Status s = ApplyStaticForm(&o, o.coordinator_given); !s.ok()) return s;
  if (absl::Status s = CheckTlsClientFiles(o.tls); !s.ok()) return s;
  if (o.token.empty()) {
    if (std::optional<std::string> token = env("DDP_TOKEN"); token.has_value()) o.token = *token;
  }
  if (absl::Status s = ResolveJobId(env, &o); !s.ok()) return s;
  if (o.standalone) {
    o.job_id = RandomJobId();
    o.notes.push_back(absl::StrCat("--standalone: embedded coordinator, job id ", o.job_id,
                                   "; --rdzv-endpoint/--rdzv-id are ignored"));
  } else if (!o.coordinator_given && !o.static_form && o.rdzv_backend != "c10d" &&
             o.max_nodes == 1) {
    // torchrun and torch.distributed.launch run one node with nothing else
    // started (`--nproc_per_node=2 train.py`): so does ddp-client, with the
    // job id it resolved (given, from the scheduler, or fresh).
    o.standalone = true;
    o.notes.push_back(
        absl::StrCat("no coordinator named (--rdzv-endpoint, $DDP_COORDINATOR) for one node: job ",
                     o.job_id, " runs on a coordinator of its own, as --standalone does"));
  }
  return o;
}

HostInfo HostInfo::FromSystem() {
  HostInfo host;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  host.cpu_count = cpus > 0 ? static_cast<int>(cpus) : 1;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) host.hostname = name;
  host.getenv = [](const std::string& var) -> std::optional<std::string> {
    const char* value = std::getenv(var.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  int gpus = 0;
  if (DIR* dir = opendir("/proc/driver/nvidia/gpus")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') ++gpus;
    }
    closedir(dir);
  }
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr) {
    int listed = 0;
    for (absl::string_view item : absl::StrSplit(visible, ',', absl::SkipWhitespace())) {
      if (absl::StartsWith(item, "-")) break;  // CUDA stops at the first invalid index
      ++listed;
    }
    gpus = std::min(gpus, listed);
  }
  host.gpu_count = gpus;
  return host;
}

}  // namespace ddp::client
