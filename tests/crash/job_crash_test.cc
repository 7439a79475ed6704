// kill -9 test of the real coordinator's rendezvous state: simulated agents
// register, get ranks, report worker failures (group restarts), and the
// coordinator is killed with SIGKILL at a random moment, then restarted on the
// same data dir; the agents resume with the same incarnations.
//
// What must hold (the job store is written behind, in batches, and every
// message waits for its batch; see JobRegistry "Write-behind"):
//   * an Assignment an agent received is never taken back: after the restart
//     the job's generation is at least every generation an agent saw, and an
//     agent that is assigned that generation again gets the same assignment
//     (ranks, world size, MASTER_ADDR/PORT, NCCL id, restart count);
//   * the members of one generation agree on its master and NCCL id, and the
//     group ranks of a generation are distinct;
//   * the restart count never goes backwards.
// The coordinator runs with an LD_PRELOAD fault injector that makes every
// fsync slow, so kills land inside batch writes.
// DDP_CRASH_SEED=N reproduces a run's kill times.

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "coordinator/session/testing/fake_agent.h"
#include "ddp/v1/jobs.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/crash/coordinator_process.h"
#include "tests/crash/test_channel.h"

namespace ddp::testing {
namespace {

using session::testing::FakeAgent;
using session::testing::FakeAgentOptions;

constexpr int kNodes = 8;
constexpr int kCycles = 20;
constexpr char kJob[] = "crash-job";
constexpr absl::Duration kRegisterTimeout = absl::Seconds(15);

v1::JobSettings Settings() {
  v1::JobSettings s;
  s.set_min_nodes(kNodes);
  s.set_max_nodes(kNodes);
  s.set_nproc_per_node(2);
  s.set_max_restarts(1000);
  s.set_join_timeout_ms(120000);
  s.set_last_call_timeout_ms(100);
  s.set_heartbeat_interval_ms(100);
  // Long enough that no node is lost while the coordinator restarts.
  s.set_heartbeat_timeout_ms(20000);
  s.set_shutdown_timeout_ms(20000);
  return s;
}

std::string Describe(const v1::Assignment& a) {
  return absl::StrCat(
      "gen ", a.generation(), " restart ", a.restart_count(), " rank ", a.group_rank(), "/",
      a.group_world_size(), " offset ", a.global_rank_offset(), " world ", a.world_size(),
      " master ", a.master_addr(), ":", a.master_port(),
      " nccl[0]=", a.nccl_unique_id().empty() ? -1 : static_cast<int>(a.nccl_unique_id()[0]));
}

bool SameAssignment(const v1::Assignment& a, const v1::Assignment& b) {
  return a.SerializeAsString() == b.SerializeAsString();
}

// Everything the agents were ever told, checked as it comes in.
class AssignmentLedger {
 public:
  void Record(int node, const v1::Assignment& a) {
    auto [it, inserted] = by_node_[node].emplace(a.generation(), a);
    if (!inserted && !SameAssignment(it->second, a)) {
      violations_.push_back(absl::StrCat("node ", node, " was told two things about generation ",
                                         a.generation(), ": first ", Describe(it->second),
                                         ", then ", Describe(a)));
    }
    auto [first, new_generation] =
        first_of_generation_.emplace(a.generation(), std::make_pair(node, a));
    if (!new_generation) {
      const v1::Assignment& other = first->second.second;
      if (other.master_addr() != a.master_addr() || other.master_port() != a.master_port() ||
          other.nccl_unique_id() != a.nccl_unique_id() ||
          other.restart_count() != a.restart_count() || other.world_size() != a.world_size()) {
        violations_.push_back(absl::StrCat("generation ", a.generation(), " differs between node ",
                                           first->second.first, " (", Describe(other),
                                           ") and node ", node, " (", Describe(a), ")"));
      }
    }
    std::set<int>& ranks = ranks_of_generation_[a.generation()];
    auto& owner = rank_owner_[{a.generation(), a.group_rank()}];
    if (owner.empty()) {
      owner = std::to_string(node);
    } else if (owner != std::to_string(node)) {
      violations_.push_back(absl::StrCat("group rank ", a.group_rank(), " of generation ",
                                         a.generation(), " given to nodes ", owner, " and ", node));
    }
    ranks.insert(a.group_rank());
    max_generation_ = std::max(max_generation_, a.generation());
    max_restart_count_ = std::max(max_restart_count_, a.restart_count());
  }

  void CheckJob(const v1::Job& job, int cycle) {
    if (job.generation() < max_generation_) {
      violations_.push_back(absl::StrCat("after restart ", cycle, " the job is at generation ",
                                         job.generation(), " but agents were assigned generation ",
                                         max_generation_, " before the crash"));
    }
    if (job.restart_count() < max_restart_count_) {
      violations_.push_back(absl::StrCat("after restart ", cycle, " the restart count is ",
                                         job.restart_count(), " but agents saw ",
                                         max_restart_count_));
    }
  }

  int64_t max_generation() const { return max_generation_; }
  size_t generations_seen() const { return first_of_generation_.size(); }
  const std::vector<std::string>& violations() const { return violations_; }

 private:
  std::map<int, std::map<int64_t, v1::Assignment>> by_node_;
  std::map<int64_t, std::pair<int, v1::Assignment>> first_of_generation_;
  std::map<int64_t, std::set<int>> ranks_of_generation_;
  std::map<std::pair<int64_t, int>, std::string> rank_owner_;
  int64_t max_generation_ = 0;
  int max_restart_count_ = 0;
  std::vector<std::string> violations_;
};

class Fleet {
 public:
  Fleet(const std::string& address, int master_port) {
    for (int i = 0; i < kNodes; ++i) {
      FakeAgentOptions options;
      options.job_id = kJob;
      options.node_id = absl::StrCat("node-", i);
      options.incarnation = 1000 + i;  // the same agent across every crash
      options.nproc = 2;
      options.settings = Settings();
      options.heartbeat_interval = absl::Milliseconds(100);
      options.master_port = master_port;
      agents_.push_back(std::make_unique<FakeAgent>(MakeFastReconnectChannel(address, i), options));
    }
  }
  ~Fleet() { JoinRegistrations(); }

  // Every agent registers on its own thread (Register blocks until the
  // durable Registered reply or the stream's end).
  void RegisterAll() {
    for (auto& agent : agents_) {
      registrations_.emplace_back([this, a = agent.get()] {
        if (a->Register(kRegisterTimeout).ok()) registered_.fetch_add(1);
      });
    }
  }
  void JoinRegistrations() {
    for (std::thread& t : registrations_) t.join();
    registrations_.clear();
  }

  FakeAgent& agent(int i) { return *agents_[i]; }
  // Agents that got their (durable) Registered reply.
  int registered() const { return registered_.load(); }

  // Returns how many assignments the agents hold.
  int RecordInto(AssignmentLedger& ledger) const {
    int count = 0;
    for (int i = 0; i < kNodes; ++i) {
      for (const v1::Assignment& a : agents_[i]->assignments()) {
        ledger.Record(i, a);
        ++count;
      }
    }
    return count;
  }

 private:
  std::vector<std::unique_ptr<FakeAgent>> agents_;
  std::vector<std::thread> registrations_;
  std::atomic<int> registered_{0};
};

absl::StatusOr<v1::Job> GetJob(const std::string& address) {
  auto stub =
      v1::JobService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  for (int attempt = 0; attempt < 100; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    context.set_wait_for_ready(true);
    v1::GetJobRequest request;
    request.set_job_id(kJob);
    v1::Job job;
    grpc::Status status = stub->GetJob(&context, request, &job);
    if (status.ok()) return job;
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
        status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
  }
  return absl::UnavailableError("GetJob kept failing");
}

uint32_t Seed() {
  const char* text = std::getenv("DDP_CRASH_SEED");
  uint32_t seed = 0;
  if (text != nullptr && absl::SimpleAtoi(text, &seed)) return seed;
  return std::random_device{}();
}

TEST(JobCrashTest, KillNineDuringRendezvousAndRestarts_NoAssignmentTakenBack) {
  const uint32_t seed = Seed();
  std::cerr << "DDP_CRASH_SEED=" << seed << "\n";
  std::mt19937 random(seed);
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string root = tmp != nullptr ? tmp : "/tmp";
  CoordinatorProcessOptions options;
  options.binary = CoordinatorBinaryFromRunfiles();
  options.data_dir = root + "/job-crash-data";
  options.work_dir = root;
  // A slow disk (every fsync 30 ms): the batch being written is always
  // there for a kill to land in.
  const char* srcdir = std::getenv("TEST_SRCDIR");
  options.extra_env = {absl::StrCat("LD_PRELOAD=", srcdir != nullptr ? srcdir : ".",
                                    "/ddp_coordinator/tests/crash/libslow_fsync.so"),
                       "DDP_TEST_FSYNC_DELAY_MS=30"};
  CoordinatorProcess process(options);
  ASSERT_TRUE(process.Start().ok());
  const std::string address = process.address();

  AssignmentLedger ledger;
  int cycles_with_assignments = 0;
  bool job_acknowledged = false;  // some agent got a Registered reply, ever
  std::uniform_int_distribution<int> kill_after_ms(0, 400);
  std::bernoulli_distribution fail_a_worker(0.6);
  std::uniform_int_distribution<int> which_node(0, kNodes - 1);
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    {
      Fleet fleet(address, 30000 + cycle);
      fleet.RegisterAll();
      const absl::Time kill_at = absl::Now() + absl::Milliseconds(kill_after_ms(random));
      if (fail_a_worker(random)) {
        // A worker failure once this cycle's generation runs: the kill may
        // land anywhere in the stop barrier and the next rendezvous.
        FakeAgent& agent = fleet.agent(which_node(random));
        if (agent.WaitForAssignment(1, kill_at - absl::Now()).ok()) {
          agent.ReportExit(0, 1, 0, "injected failure");
        }
      }
      absl::SleepFor(kill_at - absl::Now());
      const int assigned_before_kill = fleet.RecordInto(ledger);
      process.Kill9();
      fleet.JoinRegistrations();
      fleet.RecordInto(ledger);  // anything that raced the kill
      cycles_with_assignments += assigned_before_kill > 0;
      job_acknowledged = job_acknowledged || fleet.registered() > 0;
    }
    absl::Status started = process.Start();
    ASSERT_TRUE(started.ok()) << "restart " << cycle << ": " << started;
    absl::StatusOr<v1::Job> job = GetJob(address);
    if (!job_acknowledged && absl::IsNotFound(job.status())) {
      // The kill came before the job's creation was durable, and no agent
      // was told it exists: it rightly does not.
      continue;
    }
    ASSERT_TRUE(job.ok()) << job.status();
    ledger.CheckJob(*job, cycle);
    if (!ledger.violations().empty()) break;
  }

  // After the last restart everyone resumes and gets the current generation.
  if (ledger.violations().empty()) {
    Fleet fleet(address, 39999);
    fleet.RegisterAll();
    absl::StatusOr<v1::Job> job = GetJob(address);
    ASSERT_TRUE(job.ok()) << job.status();
    for (int i = 0; i < kNodes; ++i) {
      absl::StatusOr<v1::Assignment> a =
          fleet.agent(i).WaitForAssignment(ledger.max_generation(), kRegisterTimeout);
      EXPECT_TRUE(a.ok()) << "node " << i << ": " << a.status();
    }
    fleet.RecordInto(ledger);
    job = GetJob(address);
    ASSERT_TRUE(job.ok()) << job.status();
    ledger.CheckJob(*job, kCycles);
    EXPECT_EQ(job->state(), v1::RUNNING);
  }
  EXPECT_TRUE(ledger.violations().empty()) << absl::StrJoin(ledger.violations(), "\n");
  std::cerr << ledger.generations_seen() << " generations seen, " << cycles_with_assignments
            << " of " << kCycles << " kills after an assignment\n";
  // The test proves something only if kills landed on assigned generations
  // and generations moved on.
  EXPECT_GE(cycles_with_assignments, kCycles / 4);
  EXPECT_GE(ledger.generations_seen(), 3u);
  EXPECT_EQ(process.Terminate(), 0);
}

}  // namespace
}  // namespace ddp::testing
