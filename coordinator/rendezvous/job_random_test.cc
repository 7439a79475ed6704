// Randomized test of the whole state machine: simulated agents register, crash,
// restart, go silent, report failures and successes, confirm stops (or not);
// after every input the outbox is checked against invariants.

#include <map>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "coordinator/rendezvous/job.h"
#include "coordinator/rendezvous/job_test_util.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

using testing::Exit;

struct Agent {
  Incarnation incarnation = 0;  // 0: not running
  Generation generation = 0;    // last assignment
  int nproc = 1;
  bool silent = false;
  std::set<Generation> stops_pending;
};

class Simulation {
 public:
  explicit Simulation(uint32_t seed)
      : rng_(seed), h_(testing::Settings(2, 4, /*max_restarts=*/6)) {}

  void Run(int steps) {
    for (int step = 0; step < steps && !IsTerminal(h_.job().state()); ++step) {
      Act();
      Check();
    }
  }

 private:
  std::string Name(int i) { return absl::StrCat("n", i); }

  void Act() {
    const int i = rng_() % 6;
    Agent& a = agents_[i];
    const std::string node = Name(i);
    NodeRef ref{"job1", node, a.incarnation, a.generation};
    switch (rng_() % 10) {
      case 0: {  // (re)start the agent with a new incarnation
        RegisterRequest r;
        r.job_id = "job1";
        r.node_id = node;
        r.incarnation = next_incarnation_++;
        r.nproc = 1 + rng_() % 3;
        r.address = node;
        if (h_.job().Register(r).ok()) {
          a = Agent{r.incarnation, 0, r.nproc, false, {}};
        }
        break;
      }
      case 1:
        a.silent = !a.silent;
        break;
      case 2:
        if (a.incarnation != 0) {
          (void)h_.job().WorkerExited(
              ref, Exit(static_cast<int>(rng_() % a.nproc), 1, 0, "x", h_.clock().Now()));
        }
        break;
      case 3:
        if (a.incarnation != 0) {
          for (int r = 0; r < a.nproc; ++r) {
            (void)h_.job().WorkerExited(ref, Exit(r, 0, 0, "", h_.clock().Now()));
          }
        }
        break;
      default: {  // time passes; live agents heartbeat and answer
        h_.clock().Advance(absl::Milliseconds(500));
        for (auto& [id, agent] : agents_) {
          if (agent.incarnation == 0 || agent.silent) continue;
          NodeRef r{"job1", Name(id), agent.incarnation, agent.generation};
          if (h_.job().Heartbeat(r).status().code() == absl::StatusCode::kAborted) {
            agent = Agent{};  // fenced: the agent exits
            continue;
          }
          for (Generation g : agent.stops_pending) {
            NodeRef s{"job1", Name(id), agent.incarnation, g};
            (void)h_.job().WorkersStopped(s);
          }
          agent.stops_pending.clear();
        }
        h_.job().Tick();
        break;
      }
    }
  }

  void Check() {
    for (int round = 0; round < 4 && !h_.outbox().messages.empty(); ++round) {
      std::vector<OutboundMessage> batch = std::move(h_.outbox().messages);
      h_.ClearOutbox();
      std::set<std::string> registered;
      for (const v1::Member& n : testing::NodesById(h_.job().Status(true))) {
        registered.insert(absl::StrCat(n.node_id(), "/", n.incarnation()));
      }
      for (const OutboundMessage& m : batch) Deliver(m, registered);
    }
    ASSERT_GE(h_.job().generation(), generation_seen_);
    generation_seen_ = h_.job().generation();
    ASSERT_LE(h_.job().restart_count(), 6);
    ASSERT_LE(h_.job().Status(false).member_count(), 4);
  }

  void Deliver(const OutboundMessage& m, const std::set<std::string>& registered) {
    Agent& agent = agents_[std::stoi(m.node_id.substr(1))];
    if (agent.incarnation != m.incarnation) return;  // session gone
    if (const auto* stop = std::get_if<StopWorkers>(&m.body)) {
      agent.stops_pending.insert(stop->generation);
    } else if (const auto* a = std::get_if<Assignment>(&m.body)) {
      ++assignments_;
      ASSERT_GE(a->generation, last_generation_);
      last_generation_ = a->generation;
      ASSERT_LT(a->group_rank, a->group_world_size);
      ASSERT_LE(a->group_world_size, 4);
      ASSERT_LE(a->restart_count, 6);
      agent.generation = a->generation;
      // Stop barrier: no registered agent has an unconfirmed older stop.
      for (const auto& [other_id, other] : agents_) {
        if (other.stops_pending.empty() || other.incarnation == 0) continue;
        bool still_there =
            registered.count(absl::StrCat(Name(other_id), "/", other.incarnation)) > 0;
        ASSERT_FALSE(still_there && *other.stops_pending.begin() < a->generation)
            << "assignment of generation " << a->generation << " while " << Name(other_id)
            << " has not confirmed stopping generation " << *other.stops_pending.begin();
      }
    } else if (const auto* request = std::get_if<RequestMasterInfo>(&m.body)) {
      if (!agent.silent) {
        (void)h_.job().ReportMasterInfo(
            NodeRef{"job1", m.node_id, m.incarnation, request->generation},
            NewMasterInfo("", 1000, testing::NcclId()));
      }
    } else if (std::holds_alternative<JobFinished>(m.body)) {
      ++finished_;
    }
  }

 public:
  int restart_count() { return h_.job().restart_count(); }
  Generation generation() { return h_.job().generation(); }
  int assignments_ = 0;
  int finished_ = 0;

 private:
  std::mt19937 rng_;
  testing::JobHarness h_;
  std::map<int, Agent> agents_;
  Incarnation next_incarnation_ = 1;
  Generation last_generation_ = 0;
  Generation generation_seen_ = 0;
};

TEST(JobRandom, RandomAgentBehaviour_InvariantsHold) {
  int assignments = 0, restarts = 0, generations = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    Simulation sim(seed);
    sim.Run(1500);
    if (::testing::Test::HasFatalFailure()) {
      FAIL() << "seed " << seed;
    }
    assignments += sim.assignments_;
    restarts += sim.restart_count();
    generations += sim.generation();
  }
  std::printf("assignments %d, restarts %d, generations %d\n", assignments, restarts, generations);
  EXPECT_GT(restarts, 10);
  EXPECT_GT(assignments, 100);  // the simulation really ran generations
}

}  // namespace
}  // namespace ddp::rendezvous
