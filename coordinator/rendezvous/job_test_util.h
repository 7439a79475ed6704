#ifndef DDP_COORDINATOR_RENDEZVOUS_JOB_TEST_UTIL_H_
#define DDP_COORDINATOR_RENDEZVOUS_JOB_TEST_UTIL_H_

// Test helpers for the rendezvous core: a fake clock, an outbox and shorthands
// that play the agents' side (register, answer master info, confirm stops).

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "coordinator/rendezvous/job.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous::testing {

// Every node a job lists (members and spares), by node id.
inline std::vector<v1::Member> NodesById(const v1::Job& job) {
  std::vector<v1::Member> nodes(job.members().begin(), job.members().end());
  nodes.insert(nodes.end(), job.spares().begin(), job.spares().end());
  std::sort(nodes.begin(), nodes.end(),
            [](const v1::Member& a, const v1::Member& b) { return a.node_id() < b.node_id(); });
  return nodes;
}

inline JobSettings Settings(int min_nodes, int max_nodes, int max_restarts = 3) {
  JobSettings s = DefaultJobSettings();
  s.set_min_nodes(min_nodes);
  s.set_max_nodes(max_nodes);
  s.set_nproc_per_node(2);
  s.set_max_restarts(max_restarts);
  s.set_join_timeout_ms(60000);
  s.set_last_call_timeout_ms(5000);
  s.set_heartbeat_interval_ms(500);
  s.set_heartbeat_timeout_ms(3000);
  s.set_shutdown_timeout_ms(10000);
  return s;
}

inline std::string NcclId(char fill = 'x') { return std::string(kNcclUniqueIdBytes, fill); }

// Messages of type T in `outbox` addressed to `node_id` (any node when empty).
template <typename T>
std::vector<T> MessagesOf(const Outbox& outbox, const std::string& node_id = "") {
  std::vector<T> out;
  for (const OutboundMessage& m : outbox.messages) {
    if (!node_id.empty() && m.node_id != node_id) continue;
    if (const T* body = std::get_if<T>(&m.body)) out.push_back(*body);
  }
  return out;
}

// A worker's report as its agent sends it (WorkerExit is a Failure).
inline WorkerExit Exit(int local_rank, int exit_code, int signal, std::string message,
                       absl::Time time, bool hang = false, int pid = 0,
                       bool process_stopped = false) {
  WorkerExit exit;
  exit.set_local_rank(local_rank);
  exit.set_exit_code(exit_code);
  exit.set_signal(signal);
  exit.set_message(std::move(message));
  SetFailureTime(time, &exit);
  exit.set_hang(hang);
  exit.set_pid(pid);
  exit.set_process_stopped(process_stopped);
  return exit;
}

// Every field of job events (one line each), so that gtest compares and
// prints them.
inline std::vector<std::string> EventFields(const std::vector<JobEvent>& events) {
  std::vector<std::string> out;
  for (const JobEvent& e : events) out.push_back(e.ShortDebugString());
  return out;
}

inline int CountEvents(const Outbox& outbox, JobEventType type) {
  int n = 0;
  for (const JobEvent& e : outbox.events) n += e.type() == type ? 1 : 0;
  return n;
}

class JobHarness {
 public:
  explicit JobHarness(const JobSettings& settings,
                      const RendezvousLimits& limits = RendezvousLimits())
      : job_(std::make_unique<Job>("job1", settings, limits, clock_, &outbox_)) {}

  FakeClock& clock() { return clock_; }
  Job& job() { return *job_; }
  Outbox& outbox() { return outbox_; }
  void ClearOutbox() { outbox_ = Outbox(); }
  void Advance(absl::Duration d) {
    clock_.Advance(d);
    job_->Tick();
  }

  static Incarnation IncarnationOf(const std::string& node_id, int version = 1) {
    return std::hash<std::string>()(node_id) % 1000000 * 10 + version;
  }

  absl::StatusOr<RegisterResult> Register(const std::string& node_id, int nproc = 0,
                                          int requested_rank = -1, int version = 1) {
    RegisterRequest r;
    r.job_id = "job1";
    r.node_id = node_id;
    r.incarnation = IncarnationOf(node_id, version);
    r.nproc = nproc;
    r.requested_rank = requested_rank;
    r.address = absl::StrCat(node_id, ".example");
    return job_->Register(r);
  }

  NodeRef Ref(const std::string& node_id, int version = 1) const {
    return NodeRef{"job1", node_id, IncarnationOf(node_id, version), job_->generation()};
  }

  // The node holding group rank 0 answers the pending RequestMasterInfo.
  absl::Status AnswerMasterInfo(int port = 29500) {
    for (auto it = outbox_.messages.rbegin(); it != outbox_.messages.rend(); ++it) {
      if (std::holds_alternative<RequestMasterInfo>(it->body)) {
        NodeRef ref{"job1", it->node_id, it->incarnation,
                    std::get<RequestMasterInfo>(it->body).generation};
        return job_->ReportMasterInfo(ref, NewMasterInfo("", port, NcclId()));
      }
    }
    return absl::NotFoundError("no RequestMasterInfo in the outbox");
  }

  // Every member that was told to stop confirms.
  void ConfirmStops() {
    std::vector<OutboundMessage> stops;
    for (const OutboundMessage& m : outbox_.messages) {
      if (std::holds_alternative<StopWorkers>(m.body)) stops.push_back(m);
    }
    for (const OutboundMessage& m : stops) {
      NodeRef ref{"job1", m.node_id, m.incarnation, std::get<StopWorkers>(m.body).generation};
      (void)job_->WorkersStopped(ref);
    }
  }

  // Reports exit 0 for every local rank of `node_id`.
  absl::Status Succeed(const std::string& node_id, int nproc) {
    for (int i = 0; i < nproc; ++i) {
      absl::Status s = job_->WorkerExited(Ref(node_id), Exit(i, 0, 0, "", clock_.Now()));
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // Latest assignment sent to `node_id`.
  std::optional<Assignment> LastAssignment(const std::string& node_id) const {
    auto all = MessagesOf<Assignment>(outbox_, node_id);
    if (all.empty()) return std::nullopt;
    return all.back();
  }

 private:
  FakeClock clock_;
  Outbox outbox_;
  std::unique_ptr<Job> job_;
};

// Registers `nodes` (max_nodes of them) and answers the master info: the job
// runs its first generation.
inline void StartRunning(JobHarness& h, const std::vector<std::string>& nodes) {
  for (const std::string& n : nodes) ASSERT_TRUE(h.Register(n).ok());
  ASSERT_EQ(h.job().state(), JobState::kStarting);
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  ASSERT_EQ(h.job().state(), JobState::kRunning);
}

}  // namespace ddp::rendezvous::testing

#endif  // DDP_COORDINATOR_RENDEZVOUS_JOB_TEST_UTIL_H_
