// The agent core driven by a fake session, with real /bin/sh workers.

#include "client/agent/agent.h"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/agent/session_link.h"
#include "client/health_check.h"
#include "client/worker_files.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

constexpr absl::Duration kWait = absl::Seconds(20);  // loose upper bound

class FakeLink : public CoordinatorLink {
 public:
  void Send(v1::AgentMessage message) override {
    absl::MutexLock lock(&mu_);
    sent_.push_back(std::move(message));
  }
  void SetGeneration(int64_t generation) override {
    absl::MutexLock lock(&mu_);
    generation_ = generation;
    lease_expired_ = false;
  }
  void LeaseExpired() override {
    absl::MutexLock lock(&mu_);
    lease_expired_ = true;
  }
  bool lease_expired() {
    absl::MutexLock lock(&mu_);
    return lease_expired_;
  }
  bool WaitForLeaseExpired() {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&lease_expired_), kWait);
  }
  // Waits until `count` messages of `body` were sent; returns them.
  std::vector<v1::AgentMessage> WaitFor(v1::AgentMessage::BodyCase body, size_t count) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return OfLocked(body).size() >= count; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
    return OfLocked(body);
  }
  std::vector<v1::AgentMessage> Of(v1::AgentMessage::BodyCase body) {
    absl::MutexLock lock(&mu_);
    return OfLocked(body);
  }
  // The kinds of every message sent, in order.
  std::vector<v1::AgentMessage::BodyCase> Sequence() {
    absl::MutexLock lock(&mu_);
    std::vector<v1::AgentMessage::BodyCase> out;
    for (const auto& m : sent_) out.push_back(m.body_case());
    return out;
  }
  int64_t generation() {
    absl::MutexLock lock(&mu_);
    return generation_;
  }

 private:
  std::vector<v1::AgentMessage> OfLocked(v1::AgentMessage::BodyCase body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<v1::AgentMessage> out;
    for (const auto& m : sent_) {
      if (m.body_case() == body) out.push_back(m);
    }
    return out;
  }
  absl::Mutex mu_;
  std::vector<v1::AgentMessage> sent_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = -1;
  bool lease_expired_ ABSL_GUARDED_BY(mu_) = false;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class AgentTest : public ::testing::Test {
 protected:
  // Starts an agent whose workers run `/bin/sh -c script`; hang detection
  // only with a non-zero `heartbeat_timeout`.
  void StartAgent(const std::string& script,
                  absl::Duration heartbeat_timeout = absl::ZeroDuration()) {
    dir_ = absl::StrCat(getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(MakeDirectories(dir_).ok());
    AgentOptions options;
    options.launch.job_id = "job1";
    options.launch.node_id = "node-a";
    options.launch.no_python = true;
    options.launch.entrypoint = "/bin/sh";
    options.launch.script_args = {"-c", script};
    options.launch.shutdown_timeout = absl::Seconds(5);
    options.launch.in_process_restart = in_process_restart_;
    options.launch.health_checks = health_checks_;
    options.run_dir = dir_;
    options.base_env = CurrentEnvironment();
    options.base_env["OUT"] = dir_;
    options.supervisor.heartbeat_timeout = heartbeat_timeout;
    options.supervisor.check_interval = absl::Milliseconds(20);
    options.pick_port = [] { return 23456; };
    options.make_nccl_id = [] { return std::string(128, 'n'); };
    options.print_summary = [this](const std::string& text) {
      absl::MutexLock lock(&mu_);
      summary_ += text;
    };
    agent_ = std::make_unique<Agent>(std::move(options), RealClock::Get(), &link_);
    runner_ = std::thread([this] {
      int code = agent_->Run();
      absl::MutexLock lock(&mu_);
      exit_code_ = code;
    });
  }

  void TearDown() override {
    if (runner_.joinable()) {
      agent_->RequestShutdown(SIGTERM);
      runner_.join();
    }
    agent_.reset();
  }

  // Waits for Run to return; its exit code.
  int WaitForExit() {
    runner_.join();
    absl::MutexLock lock(&mu_);
    return exit_code_.value_or(-1);
  }

  static v1::CoordinatorMessage AssignmentOf(int64_t generation, int nproc) {
    v1::CoordinatorMessage m;
    v1::Assignment* a = m.mutable_assignment();
    a->set_generation(generation);
    a->set_restart_count(2);
    a->set_max_restarts(5);
    a->set_group_rank(1);
    a->set_group_world_size(2);
    a->set_global_rank_offset(4);
    a->set_local_world_size(nproc);
    a->set_world_size(4 + nproc);
    a->set_master_addr("10.0.0.1");
    a->set_master_port(29500);
    return m;
  }

  // Workers of generation 2 under a 400 ms lease that starts to run out only
  // once they run and `ready` holds (their first output is written: a slow
  // machine must not freeze them before the test sees them start); their
  // pids, empty when they did not get there in time.
  std::vector<int> StartUnderALease(std::function<bool()> ready = [] { return true; }) {
    agent_->OnLeaseGranted(absl::Hours(1));
    agent_->OnLeaseRenewed(MonotonicClock::Get().Now(), 0);
    agent_->OnCoordinatorMessage(AssignmentOf(2, 2));
    std::vector<int> pids;
    const absl::Time deadline = absl::Now() + kWait;
    while (absl::Now() < deadline) {
      pids.clear();
      for (const auto& s : agent_->WorkerStates()) {
        if (s.state() == v1::WORKER_RUNNING && s.pid() > 0) pids.push_back(s.pid());
      }
      if (pids.size() == 2 && ready()) break;
      absl::SleepFor(absl::Milliseconds(10));
    }
    if (pids.size() != 2 || !ready()) return {};
    agent_->OnLeaseRenewed(MonotonicClock::Get().Now(), 0);
    agent_->OnLeaseGranted(absl::Milliseconds(400));
    return pids;
  }

  std::string summary() {
    absl::MutexLock lock(&mu_);
    return summary_;
  }

  bool in_process_restart_ = false;             // set before StartAgent
  std::vector<HealthCheckSpec> health_checks_;  // set before StartAgent
  FakeLink link_;
  std::string dir_;
  std::unique_ptr<Agent> agent_;
  std::thread runner_;
  absl::Mutex mu_;
  std::optional<int> exit_code_ ABSL_GUARDED_BY(mu_);
  std::string summary_ ABSL_GUARDED_BY(mu_);
};

TEST_F(AgentTest, Assignment_TwoWorkers_StartWithRanksAndReportZeroExits) {
  StartAgent(
      "echo $RANK $LOCAL_RANK $WORLD_SIZE $GROUP_RANK $MASTER_ADDR "
      "$MASTER_PORT $TORCHELASTIC_RESTART_COUNT > $OUT/out_$LOCAL_RANK");
  agent_->OnCoordinatorMessage(AssignmentOf(3, 2));
  auto exits = link_.WaitFor(v1::AgentMessage::kWorkerExited, 2);
  ASSERT_EQ(exits.size(), 2u);
  for (const auto& m : exits) {
    EXPECT_EQ(m.worker_exited().header().generation(), 3);
    EXPECT_EQ(m.worker_exited().exit_code(), 0);
    EXPECT_EQ(m.worker_exited().signal(), 0);
  }
  EXPECT_EQ(link_.generation(), 3);
  EXPECT_EQ(ReadFile(dir_ + "/out_0"), "4 0 6 1 10.0.0.1 29500 2\n");
  EXPECT_EQ(ReadFile(dir_ + "/out_1"), "5 1 6 1 10.0.0.1 29500 2\n");
}

TEST_F(AgentTest, WorkerExitsOne_WorkerExitedWithCodeOne) {
  StartAgent("exit $((LOCAL_RANK + 1))");
  agent_->OnCoordinatorMessage(AssignmentOf(1, 1));
  auto exits = link_.WaitFor(v1::AgentMessage::kWorkerExited, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].worker_exited().local_rank(), 0);
  EXPECT_EQ(exits[0].worker_exited().exit_code(), 1);
  EXPECT_EQ(exits[0].worker_exited().header().generation(), 1);
  EXPECT_FALSE(exits[0].worker_exited().error_message().empty());
}

TEST_F(AgentTest, StopWorkers_RunningWorkers_WorkersStoppedAfterTheyAreGone) {
  StartAgent("echo $$ > $OUT/pid_$LOCAL_RANK; exec sleep 60");
  agent_->OnCoordinatorMessage(AssignmentOf(2, 2));
  auto states_ready = [&] {
    for (const auto& s : agent_->WorkerStates()) {
      if (s.state() != v1::WORKER_RUNNING) return false;
    }
    return agent_->WorkerStates().size() == 2;
  };
  absl::Time deadline = absl::Now() + kWait;
  while (!states_ready() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(states_ready());
  std::vector<int> pids;
  for (const auto& s : agent_->WorkerStates()) pids.push_back(s.pid());
  v1::CoordinatorMessage stop;
  stop.mutable_stop_workers()->set_generation(2);
  stop.mutable_stop_workers()->set_reason("test restart");
  agent_->OnCoordinatorMessage(stop);
  auto stopped = link_.WaitFor(v1::AgentMessage::kWorkersStopped, 1);
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0].workers_stopped().header().generation(), 2);
  for (int pid : pids) {
    EXPECT_NE(kill(pid, 0), 0) << "worker " << pid << " still exists";
  }
  EXPECT_TRUE(agent_->WorkerStates().empty());
  // Exits caused by the stop are not failures to report.
  EXPECT_TRUE(link_.Of(v1::AgentMessage::kWorkerExited).empty());
}

// Starts `generation` with one worker that sleeps, and waits until it runs.
bool RunOneSleepingWorker(Agent& agent, int64_t generation) {
  v1::CoordinatorMessage assignment;
  assignment.mutable_assignment()->set_generation(generation);
  assignment.mutable_assignment()->set_group_world_size(1);
  assignment.mutable_assignment()->set_local_world_size(1);
  assignment.mutable_assignment()->set_world_size(1);
  assignment.mutable_assignment()->set_master_addr("127.0.0.1");
  assignment.mutable_assignment()->set_master_port(29500);
  agent.OnCoordinatorMessage(assignment);
  const absl::Time deadline = absl::Now() + kWait;
  while (absl::Now() < deadline) {
    const auto states = agent.WorkerStates();
    if (states.size() == 1 && states[0].state() == v1::WORKER_RUNNING) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

v1::CoordinatorMessage StopOf(int64_t generation) {
  v1::CoordinatorMessage stop;
  stop.mutable_stop_workers()->set_generation(generation);
  stop.mutable_stop_workers()->set_reason("test restart");
  return stop;
}

TEST_F(AgentTest, StopWorkers_HealthCheckFailsAfterTheStop_LeaveWithResultsExitOne) {
  // The checks run once the worker is gone; the second fails.
  auto check = ParseHealthCheck("--health-check", "name=probe,cmd=echo 'bad GPU'; exit 1", 1);
  ASSERT_TRUE(check.ok());
  health_checks_ = {*ParseHealthCheck("--health-check", "true", 1), *check};
  StartAgent("exec sleep 60");
  ASSERT_TRUE(RunOneSleepingWorker(*agent_, 2));
  agent_->OnCoordinatorMessage(StopOf(2));
  EXPECT_EQ(WaitForExit(), kExitJobFailed);
  EXPECT_TRUE(link_.Of(v1::AgentMessage::kWorkersStopped).empty());
  const auto leaves = link_.Of(v1::AgentMessage::kLeave);
  ASSERT_EQ(leaves.size(), 1u);
  const v1::Leave& leave = leaves[0].leave();
  EXPECT_EQ(leave.header().generation(), 2);
  EXPECT_EQ(leave.reason(), "its health check 'probe' failed after generation 2: bad GPU");
  ASSERT_EQ(leave.health_checks_size(), 2);
  EXPECT_TRUE(leave.health_checks(0).passed());
  EXPECT_EQ(leave.health_checks(1).name(), "probe");
  EXPECT_FALSE(leave.health_checks(1).passed());
  EXPECT_EQ(leave.health_checks(1).output(), "bad GPU\nexit code 1");
}

TEST_F(AgentTest, StopWorkers_HealthChecksPass_WorkersStoppedNoLeave) {
  health_checks_ = {*ParseHealthCheck("--health-check", "name=probe,cmd=true", 1)};
  StartAgent("exec sleep 60");
  ASSERT_TRUE(RunOneSleepingWorker(*agent_, 2));
  agent_->OnCoordinatorMessage(StopOf(2));
  ASSERT_EQ(link_.WaitFor(v1::AgentMessage::kWorkersStopped, 1).size(), 1u);
  EXPECT_TRUE(link_.Of(v1::AgentMessage::kLeave).empty());
}

// The state letter of /proc/PID/stat ('T': stopped).
char ProcessState(int pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!stat || !std::getline(stat, line)) return '?';
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : '?';
}

// Whether `pid` is frozen by SIGSTOP: stopped ('T'), or, for a dash worker
// caught inside vfork() (dash 0.5.11+ vforks its commands), waiting in 'D' for
// a child that is stopped before it could exec.
bool Frozen(int pid) {
  const char state = ProcessState(pid);
  if (state == 'T') return true;
  if (state != 'D') return false;
  std::ifstream children_file(absl::StrCat("/proc/", pid, "/task/", pid, "/children"));
  int child = 0;
  bool any = false;
  while (children_file >> child) {
    if (ProcessState(child) != 'T') return false;
    any = true;
  }
  return any;
}

bool PollFor(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + kWait;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// The lease runs out: the workers are frozen, not stopped, and the session is
// told to resume; a renewal that names their generation thaws them where they
// were: no worker restarted, no exit reported.
TEST_F(AgentTest, LeaseRunsOut_WorkersFrozen_RenewalOfTheirGenerationThawsThem) {
  StartAgent(
      "trap 'echo term >> $OUT/handler' TERM; while true; do echo x >> $OUT/ticks_$LOCAL_RANK; "
      "sleep 0.02; done");
  std::vector<int> pids = StartUnderALease(
      [&] { return !ReadFile(dir_ + "/ticks_0").empty() && !ReadFile(dir_ + "/ticks_1").empty(); });
  ASSERT_EQ(pids.size(), 2u);
  ASSERT_TRUE(link_.WaitForLeaseExpired());
  for (int pid : pids) {
    EXPECT_TRUE(PollFor([&] { return Frozen(pid); })) << ProcessState(pid);
  }
  const std::string lease = ReadFile(dir_ + "/lease.json");
  EXPECT_NE(lease.find("\"current\": false"), std::string::npos) << lease;
  const size_t frozen_ticks = ReadFile(dir_ + "/ticks_0").size();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(ReadFile(dir_ + "/ticks_0").size(), frozen_ticks);
  // A renewal naming another generation (a restart under way) thaws nothing.
  agent_->OnLeaseRenewed(MonotonicClock::Get().Now(), 0);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_TRUE(Frozen(pids[0])) << ProcessState(pids[0]);
  agent_->OnLeaseRenewed(MonotonicClock::Get().Now(), 2);
  for (int pid : pids) {
    EXPECT_TRUE(PollFor([&] { return !Frozen(pid); }));
  }
  EXPECT_TRUE(PollFor([&] { return ReadFile(dir_ + "/ticks_0").size() > frozen_ticks; }));
  EXPECT_TRUE(PollFor([&] {
    return ReadFile(dir_ + "/lease.json").find("\"current\": true") != std::string::npos;
  }));
  std::vector<int> after;
  for (const auto& s : agent_->WorkerStates()) after.push_back(s.pid());
  EXPECT_EQ(after, pids);  // the same processes
  EXPECT_TRUE(link_.Of(v1::AgentMessage::kWorkerExited).empty());
  EXPECT_EQ(ReadFile(dir_ + "/handler"), "");
}

// Frozen, then the coordinator says the generation is being stopped: the
// workers are killed where they stand (no SIGTERM handler runs) and the stop
// is confirmed.
TEST_F(AgentTest, LeaseRunsOut_ThenStopWorkers_FrozenWorkersKilledWithoutRunning) {
  StartAgent("trap 'echo term >> $OUT/handler; exit 0' TERM; while true; do sleep 0.02; done");
  std::vector<int> pids = StartUnderALease();
  ASSERT_EQ(pids.size(), 2u);
  ASSERT_TRUE(link_.WaitForLeaseExpired());
  ASSERT_TRUE(PollFor([&] { return Frozen(pids[1]); }));
  v1::CoordinatorMessage stop;
  stop.mutable_stop_workers()->set_generation(2);
  stop.mutable_stop_workers()->set_reason("node lost");
  agent_->OnCoordinatorMessage(stop);
  ASSERT_EQ(link_.WaitFor(v1::AgentMessage::kWorkersStopped, 1).size(), 1u);
  for (int pid : pids) EXPECT_NE(kill(pid, 0), 0) << "worker " << pid << " still exists";
  EXPECT_EQ(ReadFile(dir_ + "/handler"), "");
  EXPECT_TRUE(link_.Of(v1::AgentMessage::kWorkerExited).empty());
}

// Frozen, then the next generation's Assignment arrives (the job went on
// without this node and took it back): the frozen workers are killed, the
// new ones start.
TEST_F(AgentTest, LeaseRunsOut_ThenANewerAssignment_FrozenKilledNewStarted) {
  StartAgent(
      "trap 'echo term >> $OUT/handler; exit 0' TERM; echo $DDP_GENERATION >> $OUT/started; while "
      "true; do sleep 0.02; done");
  std::vector<int> pids = StartUnderALease([&] { return ReadFile(dir_ + "/started") == "2\n2\n"; });
  ASSERT_EQ(pids.size(), 2u);
  ASSERT_TRUE(link_.WaitForLeaseExpired());
  ASSERT_TRUE(PollFor([&] { return Frozen(pids[0]); }));
  // The coordinator runs generation 3 (a lease that lasts the test).
  agent_->OnLeaseRenewed(MonotonicClock::Get().Now() + absl::Hours(1), 3);
  agent_->OnCoordinatorMessage(AssignmentOf(3, 2));
  ASSERT_TRUE(PollFor([&] { return ReadFile(dir_ + "/started") == "2\n2\n3\n3\n"; }))
      << ReadFile(dir_ + "/started");
  for (int pid : pids) EXPECT_NE(kill(pid, 0), 0) << "worker " << pid << " still exists";
  EXPECT_EQ(ReadFile(dir_ + "/handler"), "");
  EXPECT_EQ(link_.generation(), 3);
}

// Issue 23.6: a worker stopped by someone else (SIGSTOP, a debugger) when the
// coordinator orders a group stop is reported as a hang of a stopped
// process, before WorkersStopped: the evidence that it stalled its peers
// would die with it.
TEST_F(AgentTest, StopWorkers_AWorkerStoppedBySomeoneElse_ReportedAsStoppedHangFirst) {
  StartAgent("while true; do sleep 0.02; done");
  std::vector<int> pids = StartUnderALease();
  ASSERT_EQ(pids.size(), 2u);
  agent_->OnLeaseRenewed(MonotonicClock::Get().Now() + absl::Hours(1), 2);  // no freeze here
  int stopped_pid = 0;
  int stopped_rank = -1;
  for (const auto& s : agent_->WorkerStates()) {
    if (s.local_rank() == 1) {
      stopped_pid = s.pid();
      stopped_rank = s.local_rank();
    }
  }
  ASSERT_GT(stopped_pid, 0);
  ASSERT_EQ(kill(stopped_pid, SIGSTOP), 0);
  ASSERT_TRUE(PollFor([&] { return ProcessState(stopped_pid) == 'T'; }));
  v1::CoordinatorMessage stop;
  stop.mutable_stop_workers()->set_generation(2);
  stop.mutable_stop_workers()->set_reason("a hang was reported elsewhere");
  agent_->OnCoordinatorMessage(stop);
  ASSERT_EQ(link_.WaitFor(v1::AgentMessage::kWorkersStopped, 1).size(), 1u);
  const std::vector<v1::AgentMessage> exits = link_.Of(v1::AgentMessage::kWorkerExited);
  ASSERT_EQ(exits.size(), 1u);
  const v1::WorkerExited& hang = exits[0].worker_exited();
  EXPECT_EQ(hang.local_rank(), stopped_rank);
  EXPECT_TRUE(hang.hang());
  EXPECT_TRUE(hang.process_stopped());
  EXPECT_EQ(hang.pid(), stopped_pid);
  EXPECT_NE(hang.error_message().find("process stopped"), std::string::npos)
      << hang.error_message();
  const std::vector<v1::AgentMessage::BodyCase> order = link_.Sequence();
  EXPECT_LT(std::find(order.begin(), order.end(), v1::AgentMessage::kWorkerExited),
            std::find(order.begin(), order.end(), v1::AgentMessage::kWorkersStopped));
}

TEST_F(AgentTest, JobFinishedFailed_ExitCodeOneAndSummaryPrinted) {
  StartAgent("exit 3");
  agent_->OnCoordinatorMessage(AssignmentOf(1, 1));
  ASSERT_EQ(link_.WaitFor(v1::AgentMessage::kWorkerExited, 1).size(), 1u);
  v1::CoordinatorMessage finished;
  v1::JobFinished* f = finished.mutable_job_finished();
  f->set_state(v1::FAILED);
  f->set_message("budget spent");
  f->mutable_root_cause()->set_node_id("node-b");
  f->mutable_root_cause()->set_global_rank(7);
  f->mutable_root_cause()->set_local_rank(1);
  f->mutable_root_cause()->set_signal(9);
  f->mutable_root_cause()->set_message("oom");
  f->mutable_root_cause()->set_time_unix_ms(1000);
  agent_->OnCoordinatorMessage(finished);
  EXPECT_EQ(WaitForExit(), kExitJobFailed);
  const std::string text = summary();
  EXPECT_NE(text.find("/bin/sh FAILED"), std::string::npos) << text;
  EXPECT_NE(text.find("node-b"), std::string::npos) << text;
  EXPECT_NE(text.find("exitcode  : -9"), std::string::npos) << text;
  EXPECT_NE(text.find("Root Cause (first observed failure):\n[0]:\n  time      : "
                      "1970-01-01_00:00:01\n  host      : node-b"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("node-a"), std::string::npos) << text;  // local failure
  EXPECT_NE(text.find("job job1 FAILED: budget spent"), std::string::npos) << text;
  // The remote root cause came without a pid: none is made up.
  EXPECT_EQ(text.find("(pid: 0)"), std::string::npos) << text;
  EXPECT_NE(text.find("exitcode  : 3 (pid: "), std::string::npos) << text;
}

TEST_F(AgentTest, JobFinishedFailed_RemoteHangRoot_ShownAsHangWithPid) {
  StartAgent("exit 0");
  v1::CoordinatorMessage finished;
  v1::JobFinished* f = finished.mutable_job_finished();
  f->set_state(v1::FAILED);
  f->set_message("budget spent");
  v1::Failure* root = f->mutable_root_cause();
  root->set_node_id("node-b");
  root->set_global_rank(3);
  root->set_local_rank(1);
  root->set_exit_code(0);
  root->set_hang(true);
  root->set_pid(4242);
  root->set_message("hang: no heartbeat for 3.2 s");
  agent_->OnCoordinatorMessage(finished);
  EXPECT_EQ(WaitForExit(), kExitJobFailed);
  const std::string text = summary();
  EXPECT_NE(text.find("exitcode  : hang (pid: 4242)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("traceback : hang: no heartbeat for 3.2 s"), std::string::npos) << text;
  EXPECT_EQ(text.find("exitcode  : 0"), std::string::npos) << text;
}

// Local rank 1 stops heartbeating first; rank 0, blocked behind it, a little
// later: only rank 1's hang is reported, with its last heartbeat as the time.
TEST_F(AgentTest, TwoWorkersHang_OnlyTheFirstReported_KnockOnNot) {
  StartAgent(
      "touch $DDP_HEARTBEAT_FILE; "
      "if [ $LOCAL_RANK = 0 ]; then sleep 0.3; touch $DDP_HEARTBEAT_FILE; fi; "
      "exec sleep 60",
      absl::Milliseconds(500));
  const absl::Time started = absl::Now();
  agent_->OnCoordinatorMessage(AssignmentOf(2, 2));
  auto exits = link_.WaitFor(v1::AgentMessage::kWorkerExited, 1);
  ASSERT_EQ(exits.size(), 1u);
  const v1::WorkerExited& hang = exits[0].worker_exited();
  EXPECT_TRUE(hang.hang());
  EXPECT_EQ(hang.local_rank(), 1);
  EXPECT_GT(hang.pid(), 0);
  EXPECT_NE(hang.error_message().find("hang: no heartbeat for"), std::string::npos)
      << hang.error_message();
  // The failure time is the last heartbeat, before the hang was detected.
  EXPECT_LT(hang.time_unix_ms(), absl::ToUnixMillis(started + absl::Milliseconds(450)));
  auto both_hung = [&] {
    auto states = agent_->WorkerStates();
    return states.size() == 2 && states[0].state() == v1::WORKER_FAILED &&
           states[1].state() == v1::WORKER_FAILED;
  };
  const absl::Time deadline = absl::Now() + kWait;
  while (!both_hung() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(both_hung());
  v1::CoordinatorMessage stop;
  stop.mutable_stop_workers()->set_generation(2);
  agent_->OnCoordinatorMessage(stop);
  ASSERT_EQ(link_.WaitFor(v1::AgentMessage::kWorkersStopped, 1).size(), 1u);
  // Neither rank 0's knock-on hang nor the kills of the stop were reported.
  EXPECT_EQ(link_.Of(v1::AgentMessage::kWorkerExited).size(), 1u);
}

// A worker that fails on its own while the stop is under way (here: exits 3
// on SIGTERM) is reported, before WorkersStopped, so that the coordinator
// still weighs it for the root cause.
TEST_F(AgentTest, StopWorkers_OwnExitDuringStop_ReportedBeforeWorkersStopped) {
  StartAgent(
      "trap 'exit 3' TERM; echo ready > $OUT/ready_$LOCAL_RANK; "
      "sleep 60 & wait");
  agent_->OnCoordinatorMessage(AssignmentOf(4, 1));
  const absl::Time deadline = absl::Now() + kWait;
  while (ReadFile(dir_ + "/ready_0").empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_FALSE(ReadFile(dir_ + "/ready_0").empty());
  v1::CoordinatorMessage stop;
  stop.mutable_stop_workers()->set_generation(4);
  agent_->OnCoordinatorMessage(stop);
  ASSERT_EQ(link_.WaitFor(v1::AgentMessage::kWorkersStopped, 1).size(), 1u);
  const auto sequence = link_.Sequence();
  ASSERT_EQ(sequence.size(), 2u);
  EXPECT_EQ(sequence[0], v1::AgentMessage::kWorkerExited);
  EXPECT_EQ(sequence[1], v1::AgentMessage::kWorkersStopped);
  EXPECT_EQ(link_.Of(v1::AgentMessage::kWorkerExited)[0].worker_exited().exit_code(), 3);
}

TEST_F(AgentTest, JobFinishedSucceeded_ExitCodeZeroNoSummary) {
  StartAgent("exit 0");
  agent_->OnCoordinatorMessage(AssignmentOf(1, 1));
  ASSERT_EQ(link_.WaitFor(v1::AgentMessage::kWorkerExited, 1).size(), 1u);
  v1::CoordinatorMessage finished;
  finished.mutable_job_finished()->set_state(v1::SUCCEEDED);
  agent_->OnCoordinatorMessage(finished);
  EXPECT_EQ(WaitForExit(), kExitSucceeded);
  EXPECT_EQ(summary(), "");
}

TEST_F(AgentTest, RequestMasterInfo_AskedTwice_SamePortAndId) {
  StartAgent("exit 0");
  v1::CoordinatorMessage request;
  request.mutable_request_master_info()->set_generation(4);
  agent_->OnCoordinatorMessage(request);
  agent_->OnCoordinatorMessage(request);
  auto infos = link_.WaitFor(v1::AgentMessage::kMasterInfo, 2);
  ASSERT_EQ(infos.size(), 2u);
  for (const auto& m : infos) {
    EXPECT_EQ(m.master_info().header().generation(), 4);
    EXPECT_EQ(m.master_info().master_port(), 23456);
    EXPECT_EQ(m.master_info().nccl_unique_id(), std::string(128, 'n'));
  }
}

TEST_F(AgentTest, Signal_RunningWorkers_StoppedLeaveSentExit143) {
  StartAgent("exec sleep 60");
  agent_->OnCoordinatorMessage(AssignmentOf(5, 1));
  agent_->RequestShutdown(SIGTERM);
  EXPECT_EQ(WaitForExit(), 128 + SIGTERM);
  auto leaves = link_.Of(v1::AgentMessage::kLeave);
  ASSERT_EQ(leaves.size(), 1u);
  EXPECT_EQ(leaves[0].leave().header().generation(), 5);
  EXPECT_TRUE(agent_->WorkerStates().empty());
}

TEST_F(AgentTest, JobFinishedSucceeded_SpareThatRanNothing_ExitCodeThree) {
  StartAgent("exit 0");
  v1::CoordinatorMessage finished;
  finished.mutable_job_finished()->set_state(v1::SUCCEEDED);
  agent_->OnCoordinatorMessage(finished);
  EXPECT_EQ(WaitForExit(), kExitSpareUnused);
}

TEST_F(AgentTest, NodeDismissed_ExitCodeOne) {
  StartAgent("exec sleep 60");
  agent_->OnCoordinatorMessage(AssignmentOf(1, 1));
  v1::CoordinatorMessage dismissed;
  dismissed.mutable_node_dismissed()->set_reason("excluded by operator");
  agent_->OnCoordinatorMessage(dismissed);
  EXPECT_EQ(WaitForExit(), kExitJobFailed);
}

TEST_F(AgentTest, SessionFailed_ExitCodeTwo) {
  StartAgent("exit 0");
  agent_->OnSessionFailed(absl::UnavailableError("unreachable"));
  EXPECT_EQ(WaitForExit(), kExitCoordinatorError);
}

TEST_F(AgentTest, ResumedSession_ExitsOfGenerationReportedAgain) {
  StartAgent("exit 4");
  agent_->OnCoordinatorMessage(AssignmentOf(2, 1));
  ASSERT_EQ(link_.WaitFor(v1::AgentMessage::kWorkerExited, 1).size(), 1u);
  v1::Registered registered;
  registered.set_resumed(true);
  registered.set_generation(2);
  agent_->OnRegistered(registered, /*reconnected=*/true);
  auto exits = link_.WaitFor(v1::AgentMessage::kWorkerExited, 2);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[1].worker_exited().exit_code(), 4);
  // Resumed while the job is at a newer generation: nothing re-reported.
  registered.set_generation(3);
  agent_->OnRegistered(registered, /*reconnected=*/true);
  v1::CoordinatorMessage request;
  request.mutable_request_master_info()->set_generation(3);
  agent_->OnCoordinatorMessage(request);
  ASSERT_EQ(link_.WaitFor(v1::AgentMessage::kMasterInfo, 1).size(), 1u);
  EXPECT_EQ(link_.Of(v1::AgentMessage::kWorkerExited).size(), 2u);
  EXPECT_EQ(exits[1].worker_exited().header().generation(), 2);
}

TEST_F(AgentTest, DuplicateAssignment_SameGeneration_WorkersNotRestarted) {
  StartAgent("echo x >> $OUT/starts; exec sleep 60");
  agent_->OnCoordinatorMessage(AssignmentOf(3, 1));
  agent_->OnCoordinatorMessage(AssignmentOf(3, 1));
  // A request after both: once it is answered, both assignments were handled.
  v1::CoordinatorMessage request;
  request.mutable_request_master_info()->set_generation(3);
  agent_->OnCoordinatorMessage(request);
  ASSERT_EQ(link_.WaitFor(v1::AgentMessage::kMasterInfo, 1).size(), 1u);
  ASSERT_EQ(agent_->WorkerStates().size(), 1u);
  absl::Time deadline = absl::Now() + kWait;
  while (ReadFile(dir_ + "/starts").empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(ReadFile(dir_ + "/starts"), "x\n");
}

TEST_F(AgentTest, Fenced_WorkersStoppedBeforeReturnGenerationReset) {
  StartAgent("exec sleep 60");
  agent_->OnCoordinatorMessage(AssignmentOf(6, 2));
  agent_->OnFenced(absl::AbortedError("replaced"));
  EXPECT_TRUE(agent_->WorkerStates().empty());
  EXPECT_EQ(link_.generation(), 0);
  // A later assignment of any generation starts workers again.
  agent_->OnCoordinatorMessage(AssignmentOf(1, 1));
  absl::Time deadline = absl::Now() + kWait;
  while (agent_->WorkerStates().empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(agent_->WorkerStates().size(), 1u);
}

TEST_F(AgentTest, ReconnectedNotResumed_WorkersStoppedGenerationReset) {
  StartAgent("exec sleep 60");
  agent_->OnCoordinatorMessage(AssignmentOf(4, 1));
  v1::Registered registered;  // resumed=false: the coordinator forgot us
  agent_->OnRegistered(registered, /*reconnected=*/true);
  v1::CoordinatorMessage request;  // handled after the registration
  request.mutable_request_master_info()->set_generation(1);
  agent_->OnCoordinatorMessage(request);
  ASSERT_EQ(link_.WaitFor(v1::AgentMessage::kMasterInfo, 1).size(), 1u);
  EXPECT_TRUE(agent_->WorkerStates().empty());
  EXPECT_EQ(link_.generation(), 0);
  EXPECT_TRUE(link_.Of(v1::AgentMessage::kWorkerExited).empty());
}

TEST_F(AgentTest, InvalidAssignment_Ignored) {
  StartAgent("exit 0");
  v1::CoordinatorMessage bad = AssignmentOf(2, 1);
  bad.mutable_assignment()->set_local_world_size(100000);
  agent_->OnCoordinatorMessage(bad);
  v1::CoordinatorMessage bad_port = AssignmentOf(2, 1);
  bad_port.mutable_assignment()->set_master_port(70000);
  agent_->OnCoordinatorMessage(bad_port);
  v1::CoordinatorMessage request;
  request.mutable_request_master_info()->set_generation(2);
  agent_->OnCoordinatorMessage(request);
  ASSERT_EQ(link_.WaitFor(v1::AgentMessage::kMasterInfo, 1).size(), 1u);
  EXPECT_TRUE(agent_->WorkerStates().empty());
  EXPECT_EQ(link_.generation(), -1);  // never set: nothing started
}

TEST(AgentMessages, WorkerExitedMessage_Signal_NegativeExitCodeAndSignal) {
  WorkerExit exit;
  exit.local_rank = 2;
  exit.kind = WorkerExit::Kind::kSignaled;
  exit.signal = 9;
  exit.time = absl::FromUnixMillis(1234);
  v1::AgentMessage m = WorkerExitedMessage(7, exit);
  EXPECT_EQ(m.worker_exited().header().generation(), 7);
  EXPECT_EQ(m.worker_exited().local_rank(), 2);
  EXPECT_EQ(m.worker_exited().exit_code(), -9);
  EXPECT_EQ(m.worker_exited().signal(), 9);
  EXPECT_EQ(m.worker_exited().time_unix_ms(), 1234);
}

TEST(AgentMessages, WorkerExitedMessage_Hang_NonZeroCodeAndHangFlag) {
  WorkerExit exit;
  exit.kind = WorkerExit::Kind::kHung;
  exit.pid = 77;
  exit.silent_for = absl::Seconds(30);
  exit.time = absl::FromUnixMillis(40000);
  exit.last_heartbeat = absl::FromUnixMillis(10000);
  v1::AgentMessage m = WorkerExitedMessage(1, exit);
  EXPECT_TRUE(m.worker_exited().hang());
  EXPECT_NE(m.worker_exited().exit_code(), 0);
  EXPECT_EQ(m.worker_exited().error_message(), "hang: no heartbeat for 30.0 s");
  EXPECT_EQ(m.worker_exited().pid(), 77);
  EXPECT_EQ(m.worker_exited().time_unix_ms(), 10000);  // the last heartbeat
}

TEST(AgentMessages, WorkerExitedMessage_ErrorFileTimestamp_IsTheTime) {
  WorkerExit exit;
  exit.kind = WorkerExit::Kind::kExited;
  exit.exit_code = 1;
  exit.time = absl::FromUnixSeconds(1700000005);
  exit.error = ErrorFileContent{"RuntimeError: x", "", "1700000002"};
  v1::AgentMessage m = WorkerExitedMessage(1, exit);
  EXPECT_EQ(m.worker_exited().time_unix_ms(), 1700000002000);
  EXPECT_EQ(m.worker_exited().error_message(), "RuntimeError: x");
  EXPECT_EQ(m.worker_exited().pid(), 0);  // unknown: not sent
}

TEST(AgentMessages, WorkerExitedMessage_StderrTraceback_TailTracebackAndLogTravel) {
  WorkerExit exit;
  exit.kind = WorkerExit::Kind::kExited;
  exit.exit_code = 1;
  exit.stderr_tail = "token [REDACTED]\nTraceback (most recent call last):\nValueError: x\n";
  exit.stderr_traceback = "Traceback (most recent call last):\nValueError: x";
  exit.stderr_log = "/tmp/run/attempt_1/0/stderr.log";
  v1::AgentMessage m = WorkerExitedMessage(1, exit);
  EXPECT_EQ(m.worker_exited().stderr_tail(), exit.stderr_tail);
  EXPECT_EQ(m.worker_exited().traceback(), exit.stderr_traceback);
  EXPECT_EQ(m.worker_exited().log_path(), "/tmp/run/attempt_1/0/stderr.log");
}

TEST(AgentMessages, WorkerExitedMessage_ErrorFileTraceback_WinsOverStderr) {
  WorkerExit exit;
  exit.kind = WorkerExit::Kind::kExited;
  exit.exit_code = 1;
  exit.error = ErrorFileContent{"RuntimeError: x", "Traceback from @record", "1"};
  exit.stderr_traceback = "Traceback (most recent call last):\nRuntimeError: x";
  v1::AgentMessage m = WorkerExitedMessage(1, exit);
  EXPECT_EQ(m.worker_exited().traceback(), "Traceback from @record");
}

TEST(AgentMessages, FailureFromProto_HangAndPid) {
  v1::Failure failure;
  failure.set_node_id("n");
  failure.set_hang(true);
  failure.set_pid(9);
  failure.set_exit_code(-1);
  const WorkerFailure f = FailureFromProto(failure);
  EXPECT_EQ(f.kind, WorkerFailure::Kind::kHang);
  EXPECT_EQ(f.pid, 9);
}

}  // namespace
}  // namespace ddp::client

namespace ddp::client {
namespace {

// A worker that speaks the in-process restart protocol of
// ddp_coordinator.recovery (client/recovery_channel.h) in sh: it says
// "running G PID", parks on an abandon order, runs the generation a join
// names. Each generation it runs appends "G RANK PID" to $OUT/ran_<local
// rank>. Local rank 1 fails once (exit 7).
// clang-format off
constexpr char kRecoveringWorker[] = R"worker(
d=$DDP_RECOVERY_DIR; g=$DDP_GENERATION; r=$RANK
say() { echo "$1 $g $$" > $d/state.tmp && mv $d/state.tmp $d/state; }
say running; echo "$g $r $$" >> $OUT/ran_$LOCAL_RANK
if [ "$LOCAL_RANK" = 1 ] && [ ! -e $OUT/failed ]; then touch $OUT/failed; exit 7; fi
exec 3<>$d/control
while read -r line <&3; do
  case "$line" in
    *abandon*) say parked ;;
    *join*) g=$(echo "$line" | sed 's/.*"generation":\([0-9]*\).*/\1/')
            r=$(echo "$line" | sed 's/.*"RANK":"\([0-9]*\)".*/\1/')
            say running; echo "$g $r $$" >> $OUT/ran_$LOCAL_RANK ;;
  esac
done
)worker";
// clang-format on

bool WaitForText(const std::string& path, const std::string& text) {
  const absl::Time deadline = absl::Now() + kWait;
  while (ReadFile(path).find(text) == std::string::npos) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

TEST_F(AgentTest, InProcessRestart_OneWorkerFails_SurvivorKeepsItsProcessAndJoins) {
  in_process_restart_ = true;
  StartAgent(kRecoveringWorker);
  agent_->OnCoordinatorMessage(AssignmentOf(2, 2));
  auto exits = link_.WaitFor(v1::AgentMessage::kWorkerExited, 1);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].worker_exited().local_rank(), 1);
  EXPECT_EQ(exits[0].worker_exited().exit_code(), 7);
  ASSERT_TRUE(WaitForText(dir_ + "/ran_0", "2 4 "));
  const std::string first = ReadFile(dir_ + "/ran_0");
  const int survivor = std::stoi(first.substr(first.rfind(' ') + 1));

  v1::CoordinatorMessage stop;
  stop.mutable_stop_workers()->set_generation(2);
  stop.mutable_stop_workers()->set_reason("rank 5 failed");
  agent_->OnCoordinatorMessage(stop);
  ASSERT_EQ(link_.WaitFor(v1::AgentMessage::kWorkersStopped, 1).size(), 1u);
  EXPECT_EQ(kill(survivor, 0), 0) << "the survivor was stopped";
  EXPECT_EQ(ReadFile(dir_ + "/recovery/0/state"), absl::StrCat("parked 2 ", survivor, "\n"));

  // Generation 3 moves this node's ranks: the survivor runs it as rank 6 in
  // the same process; local rank 1 is a new process.
  v1::CoordinatorMessage next = AssignmentOf(3, 2);
  next.mutable_assignment()->set_global_rank_offset(6);
  next.mutable_assignment()->set_world_size(8);
  agent_->OnCoordinatorMessage(next);
  ASSERT_TRUE(WaitForText(dir_ + "/ran_0", absl::StrCat("3 6 ", survivor, "\n")))
      << ReadFile(dir_ + "/ran_0");
  ASSERT_TRUE(WaitForText(dir_ + "/ran_1", "3 7 ")) << ReadFile(dir_ + "/ran_1");
  EXPECT_EQ(link_.generation(), 3);
  std::vector<int> pids;
  for (const auto& s : agent_->WorkerStates()) pids.push_back(s.pid());
  ASSERT_EQ(pids.size(), 2u);
  EXPECT_EQ(pids[0], survivor);
  // The failure was the only exit reported; the survivor's was none.
  EXPECT_EQ(link_.Of(v1::AgentMessage::kWorkerExited).size(), 1u);
}

TEST_F(AgentTest, InProcessRestart_WorkerWithoutTheProtocol_StoppedAsBefore) {
  in_process_restart_ = true;
  StartAgent("echo $$ > $OUT/pid_$LOCAL_RANK; exec sleep 60");
  agent_->OnCoordinatorMessage(AssignmentOf(2, 1));
  ASSERT_TRUE(WaitForText(dir_ + "/pid_0", "\n"));
  const int pid = std::stoi(ReadFile(dir_ + "/pid_0"));
  v1::CoordinatorMessage stop;
  stop.mutable_stop_workers()->set_generation(2);
  agent_->OnCoordinatorMessage(stop);
  ASSERT_EQ(link_.WaitFor(v1::AgentMessage::kWorkersStopped, 1).size(), 1u);
  EXPECT_NE(kill(pid, 0), 0) << "a worker not under the wrapper must be stopped";
  EXPECT_TRUE(agent_->WorkerStates().empty());
}

}  // namespace
}  // namespace ddp::client
