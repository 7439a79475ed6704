// continuity_bench: a training job through coordinator restarts and leader
// failovers (issue 22, "Measure it"). Real processes throughout: coordinator
// binaries, two ddp-client agents (--nnodes 2 --nproc-per-node 2) running
// examples/train_ddp.py over gloo under /usr/bin/python3, the job's default
// settings (heartbeat_timeout 3 s, so a 2 s lease), and a writer doing
// durable KV puts through the coordinators' gRPC API every few ms.
//
//   part "restart":  one coordinator on a SQLite data dir; --cycles times:
//                    kill -9, keep it down for the next of --outages, start
//                    it again on the same data dir and port.
//   part "failover": a 3-member etcd, three coordinators on one prefix, the
//                    agents and the writer given all three; --failovers
//                    times: kill -9 of the leader, wait for a new one, and
//                    once the cycle is over start the killed one again (a
//                    standby).
//
// A cycle is over when both agents resumed their sessions, every freeze
// since the kill was thawed, a put was acknowledged again, and training went
// on (rank 0 logged a later step) for at least --settle_seconds. Per cycle
// it prints each agent's resume time (from the kill to its "session resumed"
// line), whether it froze and was thawed, the first put after the kill and
// the longest gap between acknowledged puts; per part, worker restarts
// (starts beyond one per rank), resume and write outage median and max, and
// how the job ended. Exits 1 when a worker restarted, a cycle timed out, a
// job did not succeed on both agents, or a part could not run.
//
//   bazel build //tools/continuity_bench
//   bazel-bin/tools/continuity_bench/continuity_bench --cycles 20 --failovers 20
//
// Logs (agents, coordinators, etcd) stay under --work_dir/continuity_bench.PID.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/crash/coordinator_process.h"
#include "tests/e2e/agent_process.h"
#include "tests/e2e/process_table.h"
#include "tests/ha/ha_cluster.h"
#include "tools/continuity_bench/ack_timeline.h"
#include "tools/continuity_bench/agent_log.h"
#include "tools/continuity_bench/put_prober.h"

ABSL_FLAG(int, cycles, 20, "Coordinator kill -9 / restart cycles (part \"restart\")");
ABSL_FLAG(int, failovers, 20, "Leader kill -9 cycles (part \"failover\")");
ABSL_FLAG(std::string, outages, "1,5,12",
          "Seconds the coordinator stays down in the restart cycles, used in turn");
ABSL_FLAG(std::string, parts, "restart,failover", "Which parts to run: restart, failover or both");
ABSL_FLAG(std::string, work_dir, "/tmp",
          "Where the run's directory (logs, data dirs, etcd) is made; it is kept");
ABSL_FLAG(double, settle_seconds, 2.0,
          "After a cycle recovered, training goes on at least this long before the next kill");
ABSL_FLAG(double, step_seconds, 0.1, "train_ddp.py --step-seconds");
ABSL_FLAG(int, steps, 0,
          "train_ddp.py --steps per part (0: enough for the planned cycles, from --settle_seconds "
          "and --step_seconds)");
ABSL_FLAG(int, put_interval_ms, 10, "The KV writer's pace: one durable put every N ms");
ABSL_FLAG(int, cycle_timeout_seconds, 90,
          "A cycle fails when the agents have not resumed and trained on this long after the "
          "kill");

namespace ddp::continuity_bench {
namespace {

constexpr absl::Duration kPoll = absl::Milliseconds(50);
constexpr int kNodes = 2;
constexpr int kWorldSize = 4;

std::atomic<bool> interrupted{false};

void OnSignal(int) { interrupted = true; }

// Polls `done` until it holds, `bound` passes or the run is interrupted.
bool PollUntil(const std::function<bool()>& done, absl::Duration bound) {
  const absl::Time deadline = absl::Now() + bound;
  while (!done()) {
    if (absl::Now() >= deadline || interrupted) return false;
    absl::SleepFor(kPoll);
  }
  return true;
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

std::string FirstLine(const std::string& path, const std::string& prefix) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, prefix)) return line;
  }
  return "";
}

std::string LoadAverage() {
  std::vector<std::string> fields =
      absl::StrSplit(testing::ReadWholeFile("/proc/loadavg"), ' ', absl::SkipEmpty());
  if (fields.size() < 3) return "?";
  return absl::StrCat(fields[0], " ", fields[1], " ", fields[2]);
}

// The two agents of one job and their workers (train_ddp.py over gloo).
class TrainingJob {
 public:
  TrainingJob(std::string dir, std::string job, std::string targets, int steps,
              int connect_timeout_s)
      : dir_(std::move(dir)),
        job_(std::move(job)),
        targets_(std::move(targets)),
        steps_(steps),
        connect_timeout_s_(connect_timeout_s) {}

  const std::string& job() const { return job_; }
  int steps() const { return steps_; }
  std::string log_path(int i) const { return Path(absl::StrCat("node-", Letter(i), ".log")); }
  std::string node(int i) const { return absl::StrCat("node-", Letter(i)); }

  void Start() {
    for (const std::string& d : {Path("results"), Path("checkpoints"), Path("logs")}) {
      mkdir(d.c_str(), 0755);
    }
    for (int i = 0; i < kNodes; ++i) {
      testing::AgentProcessOptions options;
      options.binary = testing::Runfile("client/agent/ddp-client");
      options.log_path = log_path(i);
      // The job's own lease settings: no heartbeat_timeout.
      options.args = {"--coordinator",
                      targets_,
                      "--job",
                      job_,
                      "--node-id",
                      node(i),
                      "--local-addr",
                      "127.0.0.1",
                      "--log-dir",
                      Path("logs"),
                      "--rdzv-conf",
                      "last_call_timeout=1,join_timeout=60",
                      "--shutdown-timeout",
                      "3",
                      "--connect-timeout",
                      absl::StrCat(connect_timeout_s_),
                      "--nnodes",
                      absl::StrCat(kNodes),
                      "--nproc-per-node",
                      "2",
                      testing::Runfile("examples/train_ddp.py"),
                      "--steps",
                      absl::StrCat(steps_),
                      "--step-seconds",
                      absl::StrCat(absl::GetFlag(FLAGS_step_seconds)),
                      "--backend",
                      "gloo",
                      "--checkpoint-dir",
                      Path("checkpoints"),
                      "--result-dir",
                      Path("results")};
      options.env = {
          "PYTHON_EXEC=/usr/bin/python3", "GLOO_SOCKET_IFNAME=lo",
          absl::StrCat("TORCHELASTIC_ERROR_FILE=", Path(node(i) + ".launcher_error.json")),
          absl::StrCat("PATH=", testing::Runfile("coordinator"), ":", getenv("PATH"))};
      agents_.push_back(std::make_unique<testing::AgentProcess>(options));
    }
  }

  std::string log(int i) const { return testing::ReadWholeFile(log_path(i)); }
  size_t LogSize(int i) const { return log(i).size(); }
  AgentLogEvents Scan(int i, size_t from = 0) const {
    const std::string text = log(i);
    return ScanAgentLog(from < text.size() ? absl::string_view(text).substr(from) : "");
  }

  // Both agents run in one 4-rank world and rank 0 logged its first step.
  bool WaitTraining(absl::Duration bound) const {
    return PollUntil(
        [&] {
          for (int i = 0; i < kNodes; ++i) {
            if (!absl::StrContains(log(i), " of 4,")) return false;
          }
          return LastStep() >= 0;
        },
        bound);
  }

  // The highest step rank 0 logged in either agent's log after `from`.
  int64_t LastStep(const std::vector<size_t>& from = {}) const {
    int64_t last = -1;
    for (int i = 0; i < kNodes; ++i) {
      last = std::max(last, Scan(i, from.empty() ? 0 : from[i]).last_step);
    }
    return last;
  }

  bool AnyRankDone() const {
    for (int i = 0; i < kNodes; ++i) {
      if (Scan(i).ranks_done > 0) return true;
    }
    return false;
  }

  // Exit codes of both agents (-1: still running after `bound`).
  std::vector<int> Wait(absl::Duration bound) {
    std::vector<int> codes;
    const absl::Time deadline = absl::Now() + bound;
    for (auto& agent : agents_) {
      codes.push_back(agent->Wait(std::max(deadline - absl::Now(), absl::Seconds(1))));
    }
    return codes;
  }

  // rank -> restart value of each rank's result file (train_ddp.py
  // --result-dir), and whether all ranks hold one checksum.
  std::map<int, int> ResultRestarts(bool* one_checksum) const {
    std::map<int, int> restarts;
    std::set<std::string> checksums;
    for (int rank = 0; rank < kWorldSize; ++rank) {
      const std::string json =
          testing::ReadWholeFile(Path(absl::StrCat("results/rank", rank, ".txt")));
      if (json.empty()) continue;
      int restart = -1;
      const size_t at = json.find("\"restart\": ");
      if (at != std::string::npos) {
        absl::SimpleAtoi(json.substr(at + 11, json.find_first_of(",}", at) - at - 11), &restart);
      }
      restarts[rank] = restart;
      const size_t c = json.find("\"checksum\": \"");
      if (c != std::string::npos) checksums.insert(json.substr(c + 13, 64));
    }
    *one_checksum = checksums.size() == 1;
    return restarts;
  }

 private:
  static std::string Letter(int i) { return std::string(1, static_cast<char>('a' + i)); }
  std::string Path(const std::string& name) const { return absl::StrCat(dir_, "/", name); }

  const std::string dir_;
  const std::string job_;
  const std::string targets_;
  const int steps_;
  const int connect_timeout_s_;
  std::vector<std::unique_ptr<testing::AgentProcess>> agents_;
};

// What one part does to the coordinators in each cycle.
class Disruption {
 public:
  virtual ~Disruption() = default;
  // Brings the coordinators up.
  virtual absl::Status Start() = 0;
  // The agents' and the writer's --coordinator.
  virtual std::string Targets() const = 0;
  // Before the kill (not timed): e.g. find the leader.
  virtual absl::Status Prepare(int cycle) = 0;
  // kill -9 (timed from here).
  virtual void Kill() = 0;
  // Serves again (restart, or a new leader); says what happened, and when
  // service was back (`*serving`).
  virtual absl::StatusOr<std::string> Recover(int cycle, absl::Time killed,
                                              absl::Time* serving) = 0;
  // After the cycle: e.g. the killed coordinator back as a standby.
  virtual absl::Status AfterCycle() = 0;
};

// Part "restart": one coordinator, SQLite, same data dir and port.
class CoordinatorRestarts : public Disruption {
 public:
  CoordinatorRestarts(const std::string& dir, std::vector<double> outages)
      : outages_(std::move(outages)) {
    testing::CoordinatorProcessOptions options;
    options.binary = testing::Runfile("coordinator/coordinator");
    options.data_dir = dir + "/data";
    options.work_dir = dir;
    options.keep_port_across_restarts = true;
    coordinator_ = std::make_unique<testing::CoordinatorProcess>(options);
  }

  absl::Status Start() override { return coordinator_->Start(); }
  std::string Targets() const override { return coordinator_->address(); }
  absl::Status Prepare(int) override { return absl::OkStatus(); }
  void Kill() override { coordinator_->Kill9(); }
  absl::StatusOr<std::string> Recover(int cycle, absl::Time killed, absl::Time* serving) override {
    const double down = outages_[cycle % outages_.size()];
    const absl::Time until = killed + absl::Seconds(down);
    while (absl::Now() < until && !interrupted) absl::SleepFor(absl::Milliseconds(10));
    const int port = coordinator_->port();
    if (absl::Status started = coordinator_->Start(); !started.ok()) return started;
    *serving = absl::Now();  // its port file is written once it serves
    if (coordinator_->port() != port) {
      return absl::InternalError(
          absl::StrCat("restarted on port ", coordinator_->port(), " instead of ", port));
    }
    return absl::StrFormat("down %4.1f s, serving again %5.2f s after the kill", down,
                           Seconds(*serving - killed));
  }
  absl::Status AfterCycle() override { return absl::OkStatus(); }

 private:
  const std::vector<double> outages_;
  std::unique_ptr<testing::CoordinatorProcess> coordinator_;
};

// Part "failover": a 3-member etcd, three coordinators on one prefix.
class LeaderFailovers : public Disruption {
 public:
  explicit LeaderFailovers(std::string dir) : dir_(std::move(dir)) {}

  absl::Status Start() override {
    if (!testing::EtcdInstalled()) {
      return absl::FailedPreconditionError(
          absl::StrCat(testing::kEtcdBinary, " is not installed (tools/setup.sh)"));
    }
    // The members' logs go to etcd/mN.log only if the folder exists.
    mkdir((dir_ + "/etcd").c_str(), 0755);
    auto etcd = testing::EtcdCluster::Start(dir_ + "/etcd");
    if (!etcd.ok()) return etcd.status();
    etcd_ = *std::move(etcd);
    group_ = std::make_unique<testing::CoordinatorGroup>(dir_, etcd_->Store("continuity"), 3);
    if (absl::Status started = group_->StartAll(); !started.ok()) return started;
    if (group_->WaitForLeader(absl::Seconds(20)) < 0) {
      return absl::UnavailableError("no coordinator was elected within 20 s");
    }
    return absl::OkStatus();
  }
  std::string Targets() const override { return group_->Targets(); }
  absl::Status Prepare(int) override {
    leader_ = group_->WaitForLeader(absl::Seconds(20));
    if (leader_ < 0) return absl::UnavailableError("no leader before the kill");
    return absl::OkStatus();
  }
  void Kill() override { group_->at(leader_).Kill9(); }
  absl::StatusOr<std::string> Recover(int, absl::Time killed, absl::Time* serving) override {
    const int next = group_->WaitForLeader(absl::Seconds(30), leader_);
    if (next < 0) return absl::UnavailableError("no coordinator took over within 30 s");
    *serving = absl::Now();
    return absl::StrFormat("c%d killed, c%d leads %5.2f s after the kill", leader_, next,
                           Seconds(*serving - killed));
  }
  absl::Status AfterCycle() override {
    if (absl::Status started = group_->at(leader_).Start(); !started.ok()) return started;
    if (!PollUntil([&] { return group_->RoleOf(leader_) == "STANDBY"; }, absl::Seconds(20))) {
      return absl::UnavailableError(
          absl::StrCat("c", leader_, " did not come back as a standby: ", group_->RoleOf(leader_)));
    }
    return absl::OkStatus();
  }

 private:
  const std::string dir_;
  std::unique_ptr<testing::EtcdCluster> etcd_;
  std::unique_ptr<testing::CoordinatorGroup> group_;
  int leader_ = -1;
};

struct AgentCycle {
  std::optional<double> resumed_s;  // kill -> session resumed (or a new session)
  std::optional<double> resumed_after_serving_s;
  bool new_session = false;  // "registered", not "session resumed"
  int froze = 0;
  int thawed = 0;
  absl::Duration frozen_for;
  int worker_starts = 0;
};

struct CycleResult {
  absl::Time killed;  // to find the cycle in the logs
  std::string what;
  AgentCycle agents[kNodes];
  std::optional<double> first_put_s;  // kill -> first acknowledged put
  std::optional<double> first_put_after_serving_s;
  std::optional<double> longest_gap_s;
  std::string error;
};

std::string AgentColumn(const TrainingJob& job, int i, const AgentCycle& a) {
  std::string out = absl::StrCat(job.node(i), " ");
  if (!a.resumed_s) return out + "NOT resumed";
  absl::StrAppend(&out, a.new_session ? "NEW SESSION " : "resumed ",
                  absl::StrFormat("%5.2f s", *a.resumed_s));
  if (a.froze == 0) {
    absl::StrAppend(&out, " (not frozen)");
  } else {
    absl::StrAppend(&out, absl::StrFormat(" (frozen %.2f s, ", Seconds(a.frozen_for)),
                    a.thawed >= a.froze ? "thawed)" : "NOT thawed)");
  }
  if (a.worker_starts > 0) absl::StrAppend(&out, " ", a.worker_starts, " WORKER STARTS");
  return out;
}

CycleResult RunCycle(int cycle, Disruption& disruption, TrainingJob& job, PutProber& prober) {
  CycleResult result;
  if (absl::Status prepared = disruption.Prepare(cycle); !prepared.ok()) {
    result.error = prepared.ToString();
    return result;
  }
  if (job.AnyRankDone()) {
    result.error = "training ended before this cycle: raise --steps";
    return result;
  }
  std::vector<size_t> offsets;
  for (int i = 0; i < kNodes; ++i) offsets.push_back(job.LogSize(i));
  const absl::Time killed = absl::Now();
  result.killed = killed;
  disruption.Kill();
  absl::Time serving = killed;
  absl::StatusOr<std::string> what = disruption.Recover(cycle, killed, &serving);
  if (!what.ok()) {
    result.error = what.status().ToString();
    return result;
  }
  result.what = *what;
  const absl::Duration bound =
      killed + absl::Seconds(absl::GetFlag(FLAGS_cycle_timeout_seconds)) - absl::Now();
  // Recovered: both sessions back, every freeze thawed, writes acknowledged.
  auto recovered = [&] {
    for (int i = 0; i < kNodes; ++i) {
      const AgentLogEvents events = job.Scan(i, offsets[i]);
      if (events.resumed.empty() && events.registered.empty()) return false;
      if (events.thawed.size() < events.froze.size()) return false;
    }
    return FirstAfter(prober.Acks(), killed).has_value();
  };
  if (!PollUntil(recovered, bound)) {
    result.error = "not recovered (agents resumed and thawed, a put acknowledged) in time";
  } else {
    // Training goes on: rank 0 logs a later step, and --settle_seconds pass.
    const absl::Time back = absl::Now();
    const int64_t step = job.LastStep(offsets);
    const absl::Duration settle = absl::Seconds(absl::GetFlag(FLAGS_settle_seconds));
    if (!PollUntil([&] { return job.LastStep(offsets) > step && absl::Now() >= back + settle; },
                   std::max(killed + absl::Seconds(absl::GetFlag(FLAGS_cycle_timeout_seconds)) -
                                absl::Now(),
                            settle + absl::Seconds(30)))) {
      result.error = absl::StrCat("training did not go on after the recovery (last step ",
                                  job.LastStep(offsets), ")");
    }
  }
  for (int i = 0; i < kNodes; ++i) {
    const AgentLogEvents events = job.Scan(i, offsets[i]);
    AgentCycle& a = result.agents[i];
    std::optional<absl::Time> back;
    if (!events.resumed.empty()) back = events.resumed.front();
    if (!events.registered.empty() && (!back || events.registered.front() < *back)) {
      back = events.registered.front();
      a.new_session = true;
    }
    if (back) {
      a.resumed_s = Seconds(*back - killed);
      a.resumed_after_serving_s = Seconds(*back - serving);
    }
    a.froze = static_cast<int>(events.froze.size());
    a.thawed = static_cast<int>(events.thawed.size());
    for (const Thaw& thaw : events.thawed) a.frozen_for += thaw.frozen_for;
    a.worker_starts = static_cast<int>(events.worker_starts.size());
  }
  const std::vector<absl::Time> acks = prober.Acks();
  if (auto first = FirstAfter(acks, killed)) {
    result.first_put_s = Seconds(*first - killed);
    result.first_put_after_serving_s = Seconds(*first - serving);
  }
  if (auto gap = LongestGap(acks, killed, absl::Now())) result.longest_gap_s = Seconds(*gap);
  if (result.error.empty()) {
    if (absl::Status after = disruption.AfterCycle(); !after.ok()) result.error = after.ToString();
  }
  return result;
}

// Runs one part; true when everything held.
bool RunPart(const std::string& name, const std::string& dir, Disruption& disruption, int cycles,
             bool is_restart) {
  mkdir(dir.c_str(), 0755);
  std::cout << "\n== part \"" << name << "\": " << cycles
            << (is_restart ? " coordinator kill -9 / restart cycles (SQLite data dir), outages "
                           : " kill -9 of the leading coordinator (3 coordinators, 3-member etcd)")
            << (is_restart ? absl::GetFlag(FLAGS_outages) + " s" : "") << "; load average "
            << LoadAverage() << "; " << dir << std::endl;
  if (absl::Status started = disruption.Start(); !started.ok()) {
    std::cout << "FAILED to start the coordinators: " << started << std::endl;
    return false;
  }
  const double settle = absl::GetFlag(FLAGS_settle_seconds);
  const double step_seconds = absl::GetFlag(FLAGS_step_seconds);
  // Running time the cycles need (workers do not step while frozen): the
  // settle time, the part of the outage before the lease ends (up to 2 s),
  // the wait for the next step line, and a margin before and after.
  int steps = absl::GetFlag(FLAGS_steps);
  if (steps <= 0) {
    steps = static_cast<int>((cycles * (settle + 3.5) + 20.0) / step_seconds);
  }
  double max_outage = 0;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_outages), ',')) {
    double v = 0;
    if (absl::SimpleAtod(s, &v)) max_outage = std::max(max_outage, v);
  }
  TrainingJob job(dir, absl::StrCat("continuity-", name), disruption.Targets(), steps,
                  static_cast<int>(30 + max_outage));
  PutProber prober(disruption.Targets(), absl::Milliseconds(absl::GetFlag(FLAGS_put_interval_ms)));
  prober.Start();
  const absl::Time launched = absl::Now();
  job.Start();
  if (!job.WaitTraining(absl::Seconds(180))) {
    std::cout << "FAILED: the two agents were not training in one 4-rank world within 180 s; logs "
              << job.log_path(0) << ", " << job.log_path(1) << std::endl;
    return false;
  }
  std::cout << "training: 2 agents x 2 workers, train_ddp.py --steps " << steps
            << " --step-seconds " << step_seconds << ", job defaults (heartbeat_timeout 3 s); "
            << absl::StrFormat("started in %.1f s", Seconds(absl::Now() - launched)) << std::endl;

  // Training runs twice --settle_seconds before the first kill.
  absl::SleepFor(absl::Seconds(2 * settle));
  std::vector<std::string> failures;
  std::vector<double> resumed, resumed_after_serving, first_put, first_put_after_serving, gaps;
  int freezes = 0, thaws = 0, new_sessions = 0, cycles_run = 0;
  for (int cycle = 0; cycle < cycles && !interrupted; ++cycle) {
    const CycleResult r = RunCycle(cycle, disruption, job, prober);
    ++cycles_run;
    std::string line =
        absl::StrFormat("%s %2d (kill %sZ): %s", is_restart ? "cycle" : "failover", cycle + 1,
                        absl::FormatTime("%H:%M:%E3S", r.killed, absl::UTCTimeZone()),
                        r.what.empty() ? "-" : r.what);
    for (int i = 0; i < kNodes; ++i) {
      const AgentCycle& a = r.agents[i];
      absl::StrAppend(&line, " | ", AgentColumn(job, i, a));
      if (a.resumed_s) resumed.push_back(*a.resumed_s);
      if (a.resumed_after_serving_s) resumed_after_serving.push_back(*a.resumed_after_serving_s);
      freezes += a.froze;
      thaws += a.thawed;
      if (a.new_session) ++new_sessions;
      if (a.worker_starts > 0) {
        failures.push_back(absl::StrCat("cycle ", cycle + 1, ": ", job.node(i), " started ",
                                        a.worker_starts, " workers"));
      }
      if (a.thawed < a.froze) {
        failures.push_back(absl::StrCat("cycle ", cycle + 1, ": ", job.node(i), " froze ", a.froze,
                                        " times, thawed ", a.thawed));
      }
    }
    absl::StrAppend(&line, " | writes: ");
    if (r.first_put_s) {
      absl::StrAppend(&line, absl::StrFormat("first put %5.2f s after the kill", *r.first_put_s));
      first_put.push_back(*r.first_put_s);
      first_put_after_serving.push_back(*r.first_put_after_serving_s);
    } else {
      absl::StrAppend(&line, "NO put acknowledged");
    }
    if (r.longest_gap_s) {
      absl::StrAppend(&line, absl::StrFormat(", longest gap %5.2f s", *r.longest_gap_s));
      gaps.push_back(*r.longest_gap_s);
    }
    if (!r.error.empty()) absl::StrAppend(&line, " | FAILED: ", r.error);
    std::cout << line << std::endl;
    if (!r.error.empty()) {
      failures.push_back(absl::StrCat("cycle ", cycle + 1, ": ", r.error));
      break;  // the state is unknown: the later cycles would measure nothing
    }
  }
  if (interrupted) failures.push_back("interrupted");

  // How the job ended: both agents exit 0; every rank started once.
  const bool cycles_ok = failures.empty();
  std::vector<int> codes;
  if (cycles_ok) {
    const int64_t left = std::max<int64_t>(0, steps - job.LastStep());
    const absl::Time waited = absl::Now();
    codes = job.Wait(absl::Seconds(120 + 3 * left * step_seconds));
    std::cout << absl::StrFormat("the job ran on %.1f s after the last cycle (%d steps left)\n",
                                 Seconds(absl::Now() - waited), left);
  }
  prober.Stop();
  std::map<int, int> starts;
  std::set<int64_t> generations;
  for (int i = 0; i < kNodes; ++i) {
    for (const WorkerStart& s : job.Scan(i).worker_starts) {
      ++starts[s.rank];
      generations.insert(s.generation);
    }
  }
  int worker_starts = 0, restarts = 0;
  for (int rank = 0; rank < kWorldSize; ++rank) {
    worker_starts += starts[rank];
    restarts += std::max(0, starts[rank] - 1);
  }
  bool one_checksum = false;
  const std::map<int, int> result_restarts = job.ResultRestarts(&one_checksum);
  std::string results_text = "no result files";
  if (!result_restarts.empty()) {
    std::vector<std::string> rs;
    for (const auto& [rank, restart] : result_restarts) rs.push_back(absl::StrCat(restart));
    results_text = absl::StrCat(result_restarts.size(), " ranks wrote results, ",
                                "TORCHELASTIC_RESTART_COUNT ", absl::StrJoin(rs, "/"),
                                one_checksum ? ", one checksum" : ", DIFFERENT checksums");
  }
  std::string job_json;
  if (cycles_ok) {
    job_json = testing::RunShell(absl::StrCat(testing::Runfile("tools/ddpctl/ddpctl"),
                                              " --coordinator ", disruption.Targets(),
                                              " --json jobs get ", job.job(), " 2>&1"))
                   .output;
  }
  const bool job_succeeded = absl::StrContains(job_json, "\"state\":\"SUCCEEDED\"");
  const bool no_restart_recorded = absl::StrContains(job_json, "\"restartCount\":0,") ||
                                   !absl::StrContains(job_json, "\"restartCount\"");
  const bool no_failure_recorded = absl::StrContains(job_json, "\"failures\":[]") ||
                                   !absl::StrContains(job_json, "\"failures\"");

  std::cout << absl::StrFormat("-- summary of part \"%s\" (%d of %d cycles ran; load average %s)\n",
                               name, cycles_run, cycles, LoadAverage());
  std::cout << absl::StrFormat(
      "worker restarts: %d (target 0): %d worker starts for %d ranks, generation(s) %s; %s\n",
      restarts, worker_starts, kWorldSize,
      generations.empty() ? "-" : absl::StrJoin(generations, ","), results_text);
  std::cout << absl::StrFormat(
      "agents' resume (kill -9 -> \"session resumed\"), %zu resumes: median %.2f s, max %.2f s; "
      "%s: median %.2f s, max %.2f s\n",
      resumed.size(), Median(resumed), Max(resumed),
      is_restart ? "after the restart" : "after the new leader was seen",
      Median(resumed_after_serving), Max(resumed_after_serving));
  if (new_sessions > 0) std::cout << new_sessions << " of them NEW sessions, not resumes\n";
  std::cout << absl::StrFormat("freezes: %d (of %d agent-cycles), thawed: %d\n", freezes,
                               kNodes * cycles_run, thaws);
  std::cout << absl::StrFormat(
      "write outage (longest gap between acknowledged puts), %zu cycles: median %.2f s, max "
      "%.2f s; kill -> first put: median %.2f s, max %.2f s",
      gaps.size(), Median(gaps), Max(gaps), Median(first_put), Max(first_put));
  if (is_restart) {
    std::cout << absl::StrFormat("; restart -> first put: median %.2f s, max %.2f s",
                                 Median(first_put_after_serving), Max(first_put_after_serving));
  }
  std::cout << absl::StrFormat("; %d puts acknowledged, %d failed\n", prober.Acks().size(),
                               prober.failed());
  if (cycles_ok) {
    std::cout << "job: " << job.node(0) << " exited " << codes[0] << ", " << job.node(1)
              << " exited " << codes[1]
              << "; coordinator: " << (job_succeeded ? "SUCCEEDED" : "NOT succeeded")
              << (no_restart_recorded ? ", restartCount 0" : ", RESTARTS recorded")
              << (no_failure_recorded ? ", no failure" : ", FAILURES recorded") << "\n";
    if (codes[0] != 0 || codes[1] != 0) failures.push_back("an agent did not exit 0");
    if (!job_succeeded || !no_restart_recorded || !no_failure_recorded) {
      failures.push_back(absl::StrCat("the coordinator's record of the job: ", job_json));
    }
    if (result_restarts.size() != kWorldSize || !one_checksum) {
      failures.push_back(absl::StrCat("results: ", results_text));
    }
    for (const auto& [rank, restart] : result_restarts) {
      if (restart != 0)
        failures.push_back(absl::StrCat("rank ", rank, " finished in restart ", restart));
    }
  }
  if (restarts > 0 || worker_starts != kWorldSize) {
    failures.push_back(absl::StrCat(worker_starts, " worker starts for ", kWorldSize, " ranks"));
  }
  for (const std::string& failure : failures) std::cout << "FAILED: " << failure << "\n";
  std::cout << "logs: " << job.log_path(0) << ", " << job.log_path(1) << std::endl;
  return failures.empty();
}

// The runfiles of this binary, for the coordinator, ddp-client, ddpctl and
// train_ddp.py (tests/e2e Runfile reads TEST_SRCDIR).
void FindRunfiles() {
  if (getenv("TEST_SRCDIR") != nullptr) return;
  if (const char* dir = getenv("RUNFILES_DIR"); dir != nullptr) {
    setenv("TEST_SRCDIR", dir, 1);
    return;
  }
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return;
  setenv("TEST_SRCDIR", absl::StrCat(std::string(self, n), ".runfiles").c_str(), 1);
}

int Run() {
  FindRunfiles();
  struct stat st;
  if (stat(testing::Runfile("client/agent/ddp-client").c_str(), &st) != 0) {
    std::cerr << "continuity_bench: no runfiles at " << testing::Runfile("") << "\n";
    return 1;
  }
  if (stat("/usr/lib/python3/dist-packages/torch", &st) != 0) {
    std::cerr << "continuity_bench: no PyTorch for /usr/bin/python3 (apt-get install "
                 "python3-torch)\n";
    return 1;
  }
  std::vector<double> outages;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_outages), ',', absl::SkipEmpty())) {
    double v = 0;
    if (!absl::SimpleAtod(s, &v) || v < 0) {
      std::cerr << "continuity_bench: --outages: '" << s << "' is not a number of seconds\n";
      return 2;
    }
    outages.push_back(v);
  }
  if (outages.empty()) {
    std::cerr << "continuity_bench: --outages is empty\n";
    return 2;
  }
  std::set<std::string> parts;
  for (absl::string_view p : absl::StrSplit(absl::GetFlag(FLAGS_parts), ',', absl::SkipEmpty())) {
    if (p != "restart" && p != "failover") {
      std::cerr << "continuity_bench: --parts: '" << p << "' is neither restart nor failover\n";
      return 2;
    }
    parts.insert(std::string(p));
  }
  testing::MakeSubreaper();  // orphaned workers come back here to be reaped
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  const std::string dir =
      absl::StrCat(absl::GetFlag(FLAGS_work_dir), "/continuity_bench.", getpid());
  mkdir(dir.c_str(), 0755);
  std::cout << "machine: " << std::thread::hardware_concurrency() << " cores, "
            << absl::StripPrefix(FirstLine("/proc/cpuinfo", "model name"), "model name\t: ")
            << "; load average " << LoadAverage() << "; work dir " << dir << std::endl;
  bool ok = true;
  if (parts.count("restart")) {
    CoordinatorRestarts restarts(dir + "/restart", outages);
    ok &= RunPart("restart", dir + "/restart", restarts, absl::GetFlag(FLAGS_cycles), true);
  }
  testing::KillAndReapDescendants(absl::Seconds(10));
  if (parts.count("failover") && !interrupted) {
    LeaderFailovers failovers(dir + "/failover");
    ok &= RunPart("failover", dir + "/failover", failovers, absl::GetFlag(FLAGS_failovers), false);
  }
  testing::KillAndReapDescendants(absl::Seconds(10));
  std::cout << "\n"
            << (ok ? "continuity_bench: every check held" : "continuity_bench: FAILED")
            << "; logs under " << dir << std::endl;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace ddp::continuity_bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "a 2-node gloo training job through coordinator kill -9 / restart cycles and leader "
      "failovers: worker restarts, the agents' resume times, the KV write outage.\n"
      "  bazel-bin/tools/continuity_bench/continuity_bench [--cycles 20] [--failovers 20] "
      "[--outages 1,5,12] [--parts restart,failover] [--work_dir /tmp]");
  // --help lists this file's flags (absl looks for a file named after the
  // program by default).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "tools/continuity_bench/");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  return ddp::continuity_bench::Run();
}
