// Measures the coordinator's memory per connected agent: one process serves
// JobServices, another opens N agent sessions (each on its own TCP
// connection), and the server reports its heap and RSS growth per session.
//
//   session_memory_probe [N]     (default 256; spawns itself as the client)

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "coordinator/session/job_services.h"
#include "coordinator/session/testing/fake_agent.h"
#include "coordinator/session/testing/with_own_commit_loop.h"

namespace {

using ddp::session::testing::FakeAgent;
using ddp::session::testing::FakeAgentOptions;

int64_t RssKb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return -1;
}

int RunClients(int n, const std::string& target) {
  ddp::v1::JobSettings settings;
  settings.set_min_nodes(n);
  settings.set_max_nodes(n);
  settings.set_nproc_per_node(1);
  settings.set_max_restarts(0);
  settings.set_join_timeout_ms(600000);
  settings.set_last_call_timeout_ms(1000);
  settings.set_heartbeat_interval_ms(1000);
  settings.set_heartbeat_timeout_ms(60000);
  settings.set_shutdown_timeout_ms(60000);
  std::vector<std::unique_ptr<FakeAgent>> agents;
  for (int i = 0; i < n; ++i) {
    FakeAgentOptions options;
    options.job_id = "mem";
    options.node_id = absl::StrCat("node-", i);
    options.incarnation = 1;
    options.settings = settings;
    options.heartbeat_interval = absl::Seconds(1);
    agents.push_back(
        std::make_unique<FakeAgent>(ddp::session::testing::MakeDedicatedChannel(target), options));
    if (!agents.back()->Register(absl::Seconds(30)).ok()) return 1;
  }
  for (auto& a : agents) {
    if (!a->WaitForAssignment(1, absl::Seconds(30)).ok()) return 2;
  }
  std::cout << "ready" << std::endl;
  std::string line;
  std::getline(std::cin, line);  // hold the sessions until told to stop
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--clients") {
    int n = 0;
    if (!absl::SimpleAtoi(argv[2], &n)) return 3;
    return RunClients(n, argv[3]);
  }
  int n = 256;
  if (argc > 1 && !absl::SimpleAtoi(argv[1], &n)) return 3;
  auto services = ddp::session::StartJobServicesWithLoop(ddp::RealClock::Get(), nullptr, {});
  if (!services.ok()) return 4;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  (*services)->RegisterWith(builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  // Warm up gRPC's allocations with one session first.
  const std::string target = absl::StrCat("127.0.0.1:", port);
  const std::string command = absl::StrCat("/proc/", getpid(), "/exe --clients ");
  {
    FILE* warm = popen((command + "1 " + target).c_str(), "w");
    while ((*services)->registered_sessions() < 1) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    absl::SleepFor(absl::Milliseconds(200));
    pclose(warm);
  }
  (*services)->CancelJob("mem", "warm-up").IgnoreError();
  (*services)->RemoveJob("mem").IgnoreError();
  absl::SleepFor(absl::Milliseconds(200));
  const int64_t rss_before = RssKb();
  const size_t heap_before = mallinfo2().uordblks;
  FILE* clients = popen((command + std::to_string(n) + " " + target).c_str(), "w");
  absl::Time deadline = absl::Now() + absl::Seconds(120);
  while ((*services)->registered_sessions() < n && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  absl::SleepFor(absl::Milliseconds(500));  // let the assignments settle
  const int64_t rss_after = RssKb();
  const size_t heap_after = mallinfo2().uordblks;
  const int sessions = (*services)->registered_sessions();
  std::cout << "sessions " << sessions << "\n"
            << "heap per session: "
            << (static_cast<double>(heap_after) - heap_before) / sessions / 1024.0 << " KiB\n"
            << "rss per session: " << (static_cast<double>(rss_after) - rss_before) / sessions
            << " KiB" << std::endl;
  fputs("\n", clients);
  pclose(clients);
  (*services)->Shutdown();
  server->Shutdown();
  return sessions == n ? 0 : 5;
}
