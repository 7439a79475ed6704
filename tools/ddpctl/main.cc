// ddpctl: the admin CLI of the ddp coordinator. See `ddpctl --help`.
//
// The composition root: parses the command line (command_line.h), routes
// SIGINT/SIGTERM to a stop notification for streaming commands, and runs the
// command over gRPC (grpc_commands.h).

#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/version.h"
#include "tools/ddpctl/command_line.h"
#include "tools/ddpctl/grpc_commands.h"

namespace {

constexpr char kDefaultCoordinator[] = "localhost:29400";

std::string DefaultCoordinator() {
  const char* env = std::getenv("DDP_COORDINATOR");
  if (env != nullptr && env[0] != '\0') return env;
  return kDefaultCoordinator;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--version") {
    std::cout << ddp::VersionLine("ddpctl") << "\n";
    return ddp::ddpctl::kExitOk;
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<ddp::ddpctl::Invocation> invocation =
      ddp::ddpctl::ParseCommandLine(args, DefaultCoordinator());
  if (!invocation.ok()) {
    std::cerr << "ddpctl: " << invocation.status().message() << "\n";
    return ddp::ddpctl::kExitUsage;
  }
  if (invocation->kind == ddp::ddpctl::Invocation::Kind::kHelp) {
    std::cout << invocation->help_text;
    return ddp::ddpctl::kExitOk;
  }

  // Block SIGINT/SIGTERM in every thread (gRPC's included, created later) and
  // turn them into `stop` on one dedicated thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  absl::Notification stop;
  std::thread signal_waiter([&signals, &stop] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    stop.Notify();
  });
  signal_waiter.detach();

  const int code = ddp::ddpctl::RunInvocation(*invocation, stop, std::cout, std::cerr);
  std::cout.flush();
  std::_Exit(code);  // The signal thread may still be in sigwait.
}
