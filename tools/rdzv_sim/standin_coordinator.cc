// A stand-in for the coordinator binary while it does not serve sessions yet:
// JobServices (SessionService + JobService) over a SQLite job store, with the
// coordinator's command line
//   standin_coordinator --port 0 --port-file F --data-dir D --bind 127.0.0.1
// It has no KV service and no data-dir lock; benchmark figures taken with it
// say so. `--mutex-deadlock-detection off` measures the coordinator without
// Abseil's deadlock detector. SIGTERM / SIGINT stop it.
//
// Exit codes: 0 clean shutdown; 1 runtime failure; 2 bad flags.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/logging.h"
#include "coordinator/session/job_services.h"
#include "coordinator/session/testing/with_own_commit_loop.h"
#include "coordinator/storage/sqlite_state_store.h"
#include "grpcpp/grpcpp.h"

namespace {

struct Flags {
  int port = 0;
  std::string port_file;
  std::string data_dir = "./standin-data";
  std::string bind = "127.0.0.1";
  bool deadlock_detection = true;  // Abseil's default in non-NDEBUG builds
};

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string name = argv[i];
    const std::string value = argv[i + 1];
    if (name == "--port") {
      flags->port = std::atoi(value.c_str());
    } else if (name == "--port-file") {
      flags->port_file = value;
    } else if (name == "--data-dir") {
      flags->data_dir = value;
    } else if (name == "--bind") {
      flags->bind = value;
    } else if (name == "--mutex-deadlock-detection") {
      if (value != "on" && value != "off") return false;
      flags->deadlock_detection = value == "on";
    } else {
      std::fprintf(stderr, "standin_coordinator: unknown flag '%s'\n", name.c_str());
      return false;
    }
  }
  return (argc % 2) == 1 && flags->port >= 0 && flags->port <= 65535;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    std::fprintf(stderr,
                 "usage: standin_coordinator --port P --port-file F "
                 "--data-dir D --bind ADDR [--mutex-deadlock-detection "
                 "on|off]\n");
    return 2;
  }
  if (!flags.deadlock_detection) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  mkdir(flags.data_dir.c_str(), 0755);
  auto store =
      ddp::storage::SqliteStateStore::Open(absl::StrCat(flags.data_dir, "/coordinator.db"));
  if (!store.ok()) {
    DDP_LOG(ERROR) << "opening the job store: " << store.status();
    return 1;
  }
  auto jobs = ddp::session::StartJobServicesWithLoop(ddp::RealClock::Get(), store->get(), {});
  if (!jobs.ok()) {
    DDP_LOG(ERROR) << "starting the job services: " << jobs.status();
    return 1;
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::StrCat(flags.bind, ":", flags.port),
                           grpc::InsecureServerCredentials(), &port);
  (*jobs)->RegisterWith(builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    DDP_LOG(ERROR) << "cannot listen on " << flags.bind << ":" << flags.port;
    return 1;
  }
  if (!flags.port_file.empty()) {
    const std::string temp = absl::StrCat(flags.port_file, ".tmp");
    std::ofstream(temp) << port << "\n";
    std::rename(temp.c_str(), flags.port_file.c_str());
  }
  DDP_LOG(INFO) << "stand-in coordinator serving on port " << port;
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  (*jobs)->Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  jobs->reset();
  return 0;
}
