// ddp-client's agent command (agent_command.h). Composition root: parses the flags, wires the
// Agent core to the gRPC session, routes SIGINT/SIGTERM to the agent, and
// returns the agent's exit code (documented in --help: 0 success, 1 job
// failed / node dismissed, 2 usage or coordinator errors or an entry point that
// cannot start, 128+N signal N).
//
// --standalone starts a private coordinator as a child process running this
// same executable (see standalone_coordinator.h) and joins it as the only node. The agent's own
// lines all go to RUN_DIR/agent.log (the served coordinator's to
// RUN_DIR/coordinator.log); stderr shows warnings and errors only in the forms
// that name no coordinator, unless DDP_LOG_LEVEL says otherwise.

#include "client/agent/agent_command.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/agent/agent.h"
#include "client/agent/c10d_endpoint.h"
#include "client/agent/grpc_session_client.h"
#include "client/agent/node_health_checks.h"
#include "client/agent/registration.h"
#include "client/agent/standalone_coordinator.h"
#include "client/entry_point_check.h"
#include "client/launch_options.h"
#include "client/python_package.h"
#include "client/worker_env.h"
#include "client/worker_files.h"
#include "client/worker_process.h"
#include "common/clock.h"
#include "common/log_file.h"
#include "common/logging.h"
#include "common/version.h"

namespace ddp::client {
namespace {

// Waits for SIGINT/SIGTERM/SIGHUP (blocked in every thread) and hands them to the
// agent; stops when `stop` is set.
void SignalLoop(Agent* agent, const std::atomic<bool>* stop) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  const timespec poll = {0, 100 * 1000 * 1000};
  while (!stop->load()) {
    const int sig = sigtimedwait(&set, nullptr, &poll);
    // Every one: a second SIGTERM during --preemption-grace stops at once.
    if (sig > 0) agent->RequestShutdown(sig);
  }
}

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    default:
      return "error";
  }
}

// Where the agent's own lines go: every one (INFO, or DEBUG with
// DDP_LOG_LEVEL=debug) to RUN_DIR/agent.log; to stderr, DDP_LOG_LEVEL's level,
// or with none set, WARNING in the forms that name no coordinator
// (--standalone, c10d, static: torchrun is quiet there) and INFO otherwise.
// Returns the file's level, which the coordinator this agent serves gets too.
LogLevel RouteAgentLog(const LaunchOptions& launch, const std::string& run_dir) {
  const char* env = std::getenv("DDP_LOG_LEVEL");
  LogLevel console = LogLevel::kInfo;
  const bool chosen = env != nullptr && ParseLogLevel(env, &console);
  if (!chosen && (launch.standalone || launch.rdzv_backend == "c10d" || launch.static_form)) {
    console = LogLevel::kWarning;
  }
  SetMinLogLevel(console);
  const LogLevel file_level = std::min(console, LogLevel::kInfo);
  const std::string path = run_dir + "/agent.log";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    DDP_LOG(WARNING) << "cannot open " << path << " (" << std::strerror(errno)
                     << "): the agent's lines go to stderr only";
    return console;
  }
  SetLogFile(fd, file_level);  // open until the process exits
  return file_level;
}

int RunAgent(LaunchOptions launch) {
  // The workers' base environment: this process's, with the ddp_coordinator
  // Python package that ships with this binary on PYTHONPATH.
  const EnvMap base_env = WithPythonPath(
      CurrentEnvironment(), BundledPythonPackagePath(CurrentExecutable(), CurrentEnvironment()));
  // A script, module or first import that is missing fails every generation
  // within milliseconds: say so once, before joining (nothing spent).
  if (absl::Status entry = CheckEntryPoint(launch, {ToEnvStrings(base_env)}); !entry.ok()) {
    DDP_LOG(ERROR) << "ddp-client: " << entry.message();
    return kExitEntryPointError;
  }
  absl::StatusOr<std::string> run_dir = MakeRunDirectory(launch.log_dir, launch.job_id);
  if (!run_dir.ok()) {
    DDP_LOG(ERROR) << run_dir.status();
    return kExitJobFailed;
  }
  StandaloneCoordinatorOptions serve_options;
  serve_options.log_level = LogLevelName(RouteAgentLog(launch, *run_dir));
  serve_options.log_file = *run_dir + "/coordinator.log";
  for (const std::string& note : launch.notes) DDP_LOG(INFO) << note;
  std::unique_ptr<StandaloneCoordinator> standalone;
  if (launch.standalone) {
    absl::StatusOr<std::unique_ptr<StandaloneCoordinator>> started =
        StandaloneCoordinator::Start(serve_options);
    if (!started.ok()) {
      DDP_LOG(ERROR) << started.status();
      return kExitCoordinatorError;
    }
    standalone = std::move(*started);
    launch.coordinator = standalone->address();
    if (launch.local_addr.empty()) launch.local_addr = "127.0.0.1";
  } else if (launch.rdzv_backend == "c10d" || launch.static_form) {
    absl::StatusOr<std::unique_ptr<StandaloneCoordinator>> served = ServeC10dEndpointIfHere(
        launch.coordinator,
        launch.static_form ? "--master-addr/--master-port (static form; the "
                             "coordinator uses MASTER_PORT+1)"
                           : "--rdzv-backend c10d",
        !launch.tls.enabled(), serve_options);
    if (!served.ok()) {
      DDP_LOG(ERROR) << served.status();
      return kExitCoordinatorError;
    }
    standalone = std::move(*served);  // null: another one serves the endpoint
  }
  const std::string address = AdvertisedAddress(launch, HostInfo::FromSystem().hostname);
  DDP_LOG(INFO) << "ddp-client: job " << launch.job_id << ", node " << launch.node_id << " ("
                << address << "), coordinator " << launch.coordinator << ", "
                << launch.nproc_per_node << " workers, logs in " << *run_dir;
  DDP_LOG(INFO) << "workers run under "
                << (launch.no_python && !launch.run_path
                        ? std::string("no interpreter (--no-python)")
                        : absl::StrCat(launch.python_exec,
                                       std::getenv("PYTHON_EXEC") != nullptr
                                           ? " (from PYTHON_EXEC)"
                                           : " (the default; set PYTHON_EXEC to change it)"))
                << " for Python entry points";

  AgentOptions options;
  options.launch = launch;
  options.run_dir = *run_dir;
  options.base_env = base_env;
  options.supervisor.heartbeat_timeout = launch.worker_heartbeat_timeout;
  options.supervisor.hang_timeout = launch.hang_timeout;
  options.progress.interval = launch.progress_interval;
  options.supervisor.check_interval = launch.monitor_interval;
  // In the foreground of a terminal, the workers share its foreground group:
  // each reads it (input(), pdb) and gets its Ctrl-C, as under torchrun
  // (worker_supervisor.h).
  if (IsForegroundTerminal(STDIN_FILENO)) {
    options.supervisor.terminal_fd = STDIN_FILENO;
    if (launch.nproc_per_node > 1) {
      DDP_LOG(INFO) << "interactive: every local worker reads the terminal (each typed line goes "
                       "to whichever reads first) and Ctrl-C reaches them all";
    }
  }
  options.master_addr = launch.local_addr;
  if (launch.static_form) {
    // torch.distributed.launch: the workers get the user's MASTER_ADDR and
    // MASTER_PORT (the agent of node rank 0 offers them).
    options.master_addr = launch.master_addr;
    const int master_port = *launch.master_port;
    options.pick_port = [master_port]() -> absl::StatusOr<int> { return master_port; };
  }
  Agent agent(std::move(options), RealClock::Get(), nullptr);

  SessionClientOptions session_options;
  session_options.target = launch.coordinator;
  session_options.registration = BuildRegistration(launch, address);
  if (!launch.health_checks.empty()) {
    // Before joining: the time is the node's (no job waits on it yet). A
    // failure is the coordinator's to record and refuse (it keeps the output
    // with the node); the agent reports it.
    const char* visible = getenv("CUDA_VISIBLE_DEVICES");
    for (v1::HealthCheckResult& result : RunNodeHealthChecks(
             launch, NodeHealthCheckEnvironment(launch, *run_dir, visible ? visible : ""),
             "before joining", RealClock::Get())) {
      *session_options.registration.add_health_checks() = std::move(result);
    }
  }
  session_options.connect_timeout = launch.connect_timeout;
  session_options.tls = launch.tls;
  session_options.token = launch.token;
  GrpcSessionClient session(std::move(session_options), &agent,
                            GrpcSessionClient::NewIncarnation());
  agent.set_link(&session);

  std::atomic<bool> stop_signals{false};
  std::thread signals(SignalLoop, &agent, &stop_signals);
  session.Start();
  const int code = agent.Run();
  session.Close();
  stop_signals = true;
  signals.join();
  if (standalone) standalone->Stop();
  DDP_LOG(INFO) << "ddp-client exits with code " << code;
  return code;
}

}  // namespace

int RunAgentCommand(int argc, char** argv) {
  // Before any thread exists, so every thread inherits the mask and only the
  // signal loop sees SIGINT/SIGTERM (workers reset their mask at exec).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);  // a closed terminal or ssh session: forwarded too
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (argc == 2 && std::string(argv[1]) == "--version") {
    std::printf("%s\n", ddp::VersionLine("ddp-client").c_str());
    return kExitSucceeded;
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<LaunchOptions> launch = ParseLaunchOptions(args, HostInfo::FromSystem());
  if (!launch.ok()) {
    const std::string message(launch.status().message());
    std::fprintf(
        stderr, "ddp-client: %s%s\n", message.c_str(),
        message.find("--help") == std::string::npos ? " (run ddp-client --help for usage)" : "");
    return kExitCoordinatorError;
  }
  if (launch->help) {
    std::fputs(LaunchUsage().c_str(), stdout);
    return kExitSucceeded;
  }
  return RunAgent(*std::move(launch));
}

}  // namespace ddp::client
