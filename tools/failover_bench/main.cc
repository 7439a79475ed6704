// failover_bench: how long a failover of the coordinators takes, as agents
// see it. A real 3-member etcd cluster and three coordinators on loopback
// (tests/ha), N agents in this process, each the real agent's session client
// (GrpcSessionClient, given every coordinator), all in one running job. Then,
// --kills times: kill -9 of the leader; the failover time is from the kill
// to the moment the LAST agent has resumed its session with the new leader
// (Registered on a resume). The killed coordinator is started again as a
// standby before the next round.
//
//   bazel run //tools/failover_bench -- --kills 20 --agents 16
//
// With --preload_keys N the leader is given N keys first (--value_bytes
// each, written by --preload_clients concurrent puts), so that a new leader
// has a store of that size to take over. Each kill's line also gives how
// long the new leader took from its election to serving, as it logged it
// ("leading: serving ... after the election"): the promotion, most of it
// loading the state. A killed leader is started again and waited for until
// it is ready to take over (--standby_ready: its log says its mirror of the
// store follows it) before the next kill.
//
// Prints one line per kill and min / median / p90 / max of both.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/agent/grpc_session_client.h"
#include "common/logging.h"
#include "tests/e2e/agent_process.h"
#include "tests/ha/failover_kv_client.h"
#include "tests/ha/ha_cluster.h"

ABSL_FLAG(int, kills, 20, "Leader kills (kill -9) to time");
ABSL_FLAG(int, preload_keys, 0, "Keys written before the kills (the store's size)");
ABSL_FLAG(int, value_bytes, 100, "Bytes of each preloaded key's value");
ABSL_FLAG(int, preload_clients, 32, "Concurrent puts while preloading");
ABSL_FLAG(std::string, standby_ready, "following its changes",
          "A standby is ready to take over once its log has this line (its mirror of the "
          "store is warm); the killed leader, started again, is waited for before the next "
          "kill. Empty: as soon as it stands by");
ABSL_FLAG(int, agents, 16, "Agents (nodes of one job)");
ABSL_FLAG(int64_t, leader_lease_ms, 2000, "The coordinators' --leader-lease-ms");
ABSL_FLAG(std::string, work_dir, "/tmp", "Where the etcd and coordinator data dirs go");

namespace ddp::failover_bench {
namespace {

// Registers, answers RequestMasterInfo, reports 1 running worker; notes when
// it (re)registered.
class BenchAgent : public client::SessionEvents {
 public:
  void set_link(client::GrpcSessionClient* link) { link_ = link; }
  void OnRegistered(const v1::Registered&, bool) override {
    absl::MutexLock lock(&mu_);
    registered_at_ = absl::Now();
  }
  void OnCoordinatorMessage(const v1::CoordinatorMessage& message) override {
    if (message.has_request_master_info()) {
      v1::AgentMessage reply;
      reply.mutable_master_info()->mutable_header()->set_generation(
          message.request_master_info().generation());
      reply.mutable_master_info()->set_master_port(29500);
      link_->Send(reply);
    } else if (message.has_assignment()) {
      generation_ = message.assignment().generation();
      link_->SetGeneration(generation_);
    }
  }
  void OnFenced(const absl::Status& status) override { DDP_LOG(WARNING) << "fenced: " << status; }
  void OnSessionFailed(const absl::Status& status) override {
    DDP_LOG(ERROR) << "session failed: " << status;
  }
  std::vector<v1::WorkerState> WorkerStates() override {
    if (generation_ == 0) return {};
    v1::WorkerState state;
    state.set_local_rank(0);
    state.set_state(v1::WORKER_RUNNING);
    state.set_pid(getpid());
    state.set_heartbeat_age_ms(-1);
    return {state};
  }
  void OnLeaseGranted(absl::Duration) override {}
  void OnLeaseRenewed(absl::Time, int64_t) override {}

  absl::Time registered_at() const {
    absl::MutexLock lock(&mu_);
    return registered_at_;
  }
  bool running() const { return generation_ > 0; }

 private:
  client::GrpcSessionClient* link_ = nullptr;
  std::atomic<int64_t> generation_{0};
  mutable absl::Mutex mu_;
  absl::Time registered_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// The last "leading: serving ... D after the election" of a coordinator's
// log: D, its promotion.
std::optional<absl::Duration> PromotionTime(const std::string& log) {
  const std::string tail = " after the election";
  const size_t end = log.rfind(tail);
  if (end == std::string::npos) return std::nullopt;
  const size_t start = log.rfind(' ', end - 1);
  if (start == std::string::npos) return std::nullopt;
  absl::Duration took;
  if (!absl::ParseDuration(log.substr(start + 1, end - start - 1), &took)) return std::nullopt;
  return took;
}

// --preload_keys keys of --value_bytes in namespace "preload", through the
// leader. False (said on stderr) when a put fails.
bool Preload(const std::string& targets) {
  const int keys = absl::GetFlag(FLAGS_preload_keys);
  const int clients = std::max(1, absl::GetFlag(FLAGS_preload_clients));
  testing::FailoverKvClient client(targets);
  const std::string value(absl::GetFlag(FLAGS_value_bytes), 'v');
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      for (int i = next++; i < keys && !failed; i = next++) {
        v1::PutRequest put;
        put.set_namespace_("preload");
        put.set_key(absl::StrFormat("key-%08d", i));
        put.set_value(value);
        v1::PutResponse response;
        grpc::Status status = client.Put(put, &response);
        if (!status.ok()) {
          std::cerr << "preload: put " << i << " failed: " << status.error_message() << "\n";
          failed = true;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (failed) return false;
  v1::StatusResponse status;
  if (grpc::Status s = client.Status(&status); !s.ok()) {
    std::cerr << "preload: status failed: " << s.error_message() << "\n";
    return false;
  }
  std::printf("preloaded %d keys of %d bytes in %.1f s: the store has %lld keys, revision %lld\n",
              keys, absl::GetFlag(FLAGS_value_bytes), absl::ToDoubleSeconds(absl::Now() - start),
              static_cast<long long>(status.keys()), static_cast<long long>(status.revision()));
  return true;
}

// Waits (up to `bound`) until the log at `path` has `line` after its first
// `offset` bytes.
bool WaitForLine(const std::string& path, size_t offset, const std::string& line,
                 absl::Duration bound) {
  const absl::Time deadline = absl::Now() + bound;
  while (true) {
    const std::string log = testing::ReadWholeFile(path);
    if (log.size() > offset && log.find(line, offset) != std::string::npos) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

// "min A, median B, p90 C, max D" of sorted `values` (in `unit`).
std::string Summary(std::vector<double> values, const char* unit) {
  if (values.empty()) return "none";
  std::sort(values.begin(), values.end());
  // p90: the nearest rank; the median as earlier runs reported it (n/2).
  const size_t p90 = std::max<size_t>(1, (values.size() * 9 + 9) / 10) - 1;
  return absl::StrFormat("min %.3f %s, median %.3f %s, p90 %.3f %s, max %.3f %s", values.front(),
                         unit, values[values.size() / 2], unit, values[p90], unit, values.back(),
                         unit);
}

int Run() {
  const std::string dir = absl::StrCat(absl::GetFlag(FLAGS_work_dir), "/failover_bench.", getpid());
  mkdir(dir.c_str(), 0755);
  auto etcd = testing::EtcdCluster::Start(dir);
  if (!etcd.ok()) {
    std::cerr << etcd.status() << "\n";
    return 1;
  }
  testing::CoordinatorGroup group(
      dir, (*etcd)->Store("bench"), 3,
      {"--leader-lease-ms", absl::StrCat(absl::GetFlag(FLAGS_leader_lease_ms)), "--log-level",
       "info"});
  if (absl::Status started = group.StartAll(); !started.ok()) {
    std::cerr << started << "\n";
    return 1;
  }
  if (group.WaitForLeader(absl::Seconds(15)) < 0) {
    std::cerr << "no leader elected\n";
    return 1;
  }
  if (absl::GetFlag(FLAGS_preload_keys) > 0 && !Preload(group.Targets())) return 1;
  const int n = absl::GetFlag(FLAGS_agents);
  std::vector<std::unique_ptr<BenchAgent>> agents;
  std::vector<std::unique_ptr<client::GrpcSessionClient>> links;
  for (int i = 0; i < n; ++i) {
    client::SessionClientOptions options;
    options.target = group.Targets();
    v1::Register& r = options.registration;
    r.set_job_id("failover-bench");
    r.set_node_id(absl::StrCat("node-", i));
    r.set_nproc(1);
    r.set_address("127.0.0.1");
    r.set_agent_version("failover_bench");
    r.mutable_settings()->set_min_nodes(n);
    r.mutable_settings()->set_max_nodes(n);
    r.mutable_settings()->set_nproc_per_node(1);
    // A lease (2/3 of it: 10 s) longer than any failover.
    r.mutable_settings()->set_heartbeat_timeout_ms(15000);
    agents.push_back(std::make_unique<BenchAgent>());
    links.push_back(std::make_unique<client::GrpcSessionClient>(options, agents.back().get(), 0));
    agents.back()->set_link(links.back().get());
    links.back()->Start();
  }
  const absl::Time running_by = absl::Now() + absl::Seconds(60);
  while (absl::Now() < running_by &&
         !std::all_of(agents.begin(), agents.end(), [](auto& a) { return a->running(); })) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (const std::string ready = absl::GetFlag(FLAGS_standby_ready); !ready.empty()) {
    for (int i = 0; i < group.size(); ++i) {
      if (!WaitForLine(group.at(i).log_path(), 0, ready, absl::Seconds(60))) {
        std::cerr << "coordinator " << i << " never logged '" << ready << "'\n";
        return 1;
      }
    }
  }
  std::cout << n << " agents running; killing the leader " << absl::GetFlag(FLAGS_kills)
            << " times (leader lease " << absl::GetFlag(FLAGS_leader_lease_ms) << " ms)\n";
  std::vector<double> seconds, promotions_ms;
  for (int kill = 0; kill < absl::GetFlag(FLAGS_kills); ++kill) {
    const int leader = group.WaitForLeader(absl::Seconds(15));
    if (leader < 0) {
      std::cerr << "no leader before kill " << kill << "\n";
      return 1;
    }
    absl::SleepFor(absl::Milliseconds(500));
    const absl::Time killed = absl::Now();
    group.at(leader).Kill9();
    const absl::Time deadline = killed + absl::Seconds(30);
    absl::Time last = absl::InfinitePast();
    while (absl::Now() < deadline) {
      last = killed;
      bool all = true;
      for (auto& agent : agents) {
        const absl::Time at = agent->registered_at();
        if (at < killed) {
          all = false;
          break;
        }
        last = std::max(last, at);
      }
      if (all) break;
      absl::SleepFor(absl::Milliseconds(5));
    }
    if (last <= killed) {
      std::cerr << "kill " << kill << ": not every agent resumed within 30 s\n";
      return 1;
    }
    const double took = absl::ToDoubleSeconds(last - killed);
    seconds.push_back(took);
    std::string promoted = "promotion not found in the log";
    const int successor = group.WaitForLeader(absl::Seconds(5), leader);
    if (successor >= 0) {
      if (std::optional<absl::Duration> p =
              PromotionTime(testing::ReadWholeFile(group.at(successor).log_path()))) {
        promotions_ms.push_back(absl::ToDoubleMilliseconds(*p));
        promoted = absl::StrFormat("coordinator %d served %.1f ms after its election", successor,
                                   promotions_ms.back());
      }
    }
    std::printf("kill %2d: every agent resumed %.3f s after the kill; %s\n", kill + 1, took,
                promoted.c_str());
    const size_t logged = testing::ReadWholeFile(group.at(leader).log_path()).size();
    if (absl::Status restarted = group.at(leader).Start(); !restarted.ok()) {
      std::cerr << restarted << "\n";
      return 1;
    }
    const std::string ready = absl::GetFlag(FLAGS_standby_ready);
    if (!ready.empty() &&
        !WaitForLine(group.at(leader).log_path(), logged, ready, absl::Seconds(60))) {
      std::cerr << "kill " << kill << ": the restarted coordinator never logged '" << ready
                << "'\n";
      return 1;
    }
  }
  std::printf("failover (kill -9 of the leader -> all %d agents resumed), %zu kills: %s\n", n,
              seconds.size(), Summary(seconds, "s").c_str());
  std::printf("promotion (elected -> serving, the new leader's log), %zu kills: %s\n",
              promotions_ms.size(), Summary(promotions_ms, "ms").c_str());
  for (auto& link : links) link->Close();
  return 0;
}

}  // namespace
}  // namespace ddp::failover_bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ddp::failover_bench::Run();
}
