#include "coordinator/rendezvous/job_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/rendezvous/job_test_util.h"
#include "coordinator/rendezvous/registry_test_util.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

using testing::Exit;
using testing::MessagesOf;
using testing::NcclId;
using testing::Settings;

RegisterRequest Req(const std::string& job, const std::string& node, Incarnation incarnation,
                    std::optional<JobSettings> settings = std::nullopt) {
  RegisterRequest r;
  r.job_id = job;
  r.node_id = node;
  r.incarnation = incarnation;
  r.address = node + ".host";
  r.settings = settings;
  return r;
}

NodeRef Ref(const std::string& job, const std::string& node, Incarnation incarnation,
            Generation generation) {
  return NodeRef{job, node, incarnation, generation};
}

// Job "j" of nodes a (incarnation 1) and b (2), nproc 2 each, running generation 1.
void StartTwoNodeJob(JobRegistry& registry) {
  ASSERT_TRUE(registry.Register(Req("j", "a", 1, Settings(2, 2))).ok());
  ASSERT_TRUE(registry.Register(Req("j", "b", 2, Settings(2, 2))).ok());
  ASSERT_TRUE(
      registry.ReportMasterInfo(Ref("j", "a", 1, 1), NewMasterInfo("", 29500, NcclId())).ok());
}

TEST(JobRegistry, RegisterUnknownJobWithSettings_CreatesJobImplicitly) {
  FakeClock clock;
  JobRegistry registry(clock, nullptr, {});
  auto r = registry.Register(Req("j", "a", 1, Settings(2, 2)));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->created_job);
  auto second = registry.Register(Req("j", "b", 2, Settings(2, 2)));
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->created_job);
  EXPECT_EQ(second->state, JobState::kStarting);
  auto bad = registry.Register(Req("j", "c", 3, Settings(1, 2)));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(bad.status().message().find("min_nodes=1"), std::string::npos);
  EXPECT_NE(bad.status().message().find("min_nodes=2"), std::string::npos);
}

TEST(JobRegistry, RegisterUnknownJobWithoutSettings_NotFound) {
  FakeClock clock;
  JobRegistry registry(clock, nullptr, {});
  EXPECT_EQ(registry.Register(Req("j", "a", 1)).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.Heartbeat(Ref("j", "a", 1, 0)).status().code(), absl::StatusCode::kNotFound);
}

TEST(JobRegistry, RejectedFirstRegistration_LeavesNoJob) {
  FakeClock clock;
  JobRegistry registry(clock, nullptr, {});
  EXPECT_EQ(registry.Register(Req("j", "bad node", 1, Settings(1, 1))).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(registry.ListJobs()->empty());
  EXPECT_TRUE(registry.TakeOutbox().empty());
}

TEST(JobRegistry, CreateJob_ValidatesAndLimits) {
  FakeClock clock;
  JobRegistryOptions options;
  options.max_jobs = 1;
  JobRegistry registry(clock, nullptr, options);
  EXPECT_EQ(registry.CreateJob("j", Settings(3, 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.CreateJob("bad id", Settings(1, 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(registry.CreateJob("j", Settings(1, 2)).ok());
  EXPECT_EQ(registry.CreateJob("j", Settings(1, 2)).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.CreateJob("k", Settings(1, 2)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(registry.Register(Req("k2", "a", 1, Settings(1, 1))).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(JobRegistry, Register_ChecksTheJobIdAndSettingsOnce_NamingTheBadValue) {
  FakeClock clock;
  JobRegistry registry(clock, nullptr, {});
  absl::Status status =
      registry.Register(Req(std::string(254, 'j'), "a", 1, Settings(1, 1))).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("job id"), std::string::npos) << status;
  JobSettings bad = Settings(1, 1);
  bad.set_min_nodes(0);
  status = registry.Register(Req("j", "a", 1, bad)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("min_nodes"), std::string::npos) << status;
  // Also when the job exists: the settings are checked before the job sees them.
  ASSERT_TRUE(registry.Register(Req("j", "a", 1, Settings(1, 2))).ok());
  EXPECT_EQ(registry.Register(Req("j", "b", 2, bad)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(JobRegistry, OutboxListener_CalledWhenOutboxFills) {
  FakeClock clock;
  std::atomic<int> calls{0};
  JobRegistryOptions options;
  options.on_outbox = [&] { ++calls; };
  JobRegistry registry(clock, nullptr, options);
  ASSERT_TRUE(registry.Register(Req("j", "a", 1, Settings(1, 1))).ok());
  EXPECT_EQ(calls.load(), 1);
  Outbox out = registry.TakeOutbox();
  auto requests = MessagesOf<RequestMasterInfo>(out, "a");
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(out.messages[0].incarnation, 1u);
  ASSERT_TRUE(
      registry.ReportMasterInfo(Ref("j", "a", 1, 1), NewMasterInfo("", 29500, NcclId())).ok());
  EXPECT_EQ(calls.load(), 2);
  out = registry.TakeOutbox();
  ASSERT_EQ(MessagesOf<Assignment>(out, "a").size(), 1u);
  EXPECT_EQ(MessagesOf<Assignment>(out, "a")[0].master_addr, "a.host");
}

TEST(JobRegistry, SchedulerOps_ReachTheJob) {
  FakeClock clock;
  JobRegistry registry(clock, nullptr, {});
  ASSERT_TRUE(registry.CreateJob("j", Settings(1, 2)).ok());
  EXPECT_EQ(registry.UpdateJob("nope", 1, 2).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(registry.UpdateJob("j", 1, 3).ok());
  EXPECT_EQ(registry.GetJob("j", false)->settings().max_nodes(), 3);
  EXPECT_EQ(registry.RemoveJob("j").code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(registry.ExcludeNode("j", "x", "flaky").ok());
  ASSERT_TRUE(registry.CancelJob("j", "done").ok());
  EXPECT_EQ(registry.GetJob("j", false)->state(), v1::CANCELLED);
  auto events = registry.EventsSince("j", 0, 100);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().type(), JobEvent::JOB_FINISHED);
  ASSERT_TRUE(registry.RemoveJob("j").ok());
  EXPECT_EQ(registry.GetJob("j", false).status().code(), absl::StatusCode::kNotFound);
}

TEST(JobRegistry, Tick_FiresTimeoutsOfEveryJob) {
  FakeClock clock;
  JobRegistry registry(clock, nullptr, {});
  ASSERT_TRUE(registry.Register(Req("j1", "a", 1, Settings(2, 2))).ok());
  ASSERT_TRUE(registry.Register(Req("j2", "a", 1, Settings(2, 2))).ok());
  clock.Advance(absl::Seconds(3));
  registry.Tick();
  EXPECT_EQ(registry.GetJob("j1", false)->registered_nodes(), 0);
  EXPECT_EQ(registry.GetJob("j2", false)->registered_nodes(), 0);
}

// A tick that comes long after the previous one: the coordinator stalled
// (paused, frozen) and heard nobody; nobody is lost for it.
TEST(JobRegistry, Tick_AfterAStall_NoNodeLostForTheSilenceItDidNotHear) {
  FakeClock clock;
  JobRegistryOptions options;
  options.stall_threshold = absl::Seconds(1);
  JobRegistry registry(clock, nullptr, options);
  ASSERT_TRUE(registry.Register(Req("j1", "a", 1, Settings(2, 2))).ok());
  registry.Tick();
  clock.Advance(absl::Seconds(30));
  registry.Tick();
  EXPECT_EQ(registry.GetJob("j1", false)->registered_nodes(), 1);
  // Ticks at the usual cadence from now on: the node, still silent, is lost
  // a full heartbeat timeout (3 s) after the coordinator resumed.
  for (int i = 0; i < 29; ++i) {
    clock.Advance(absl::Milliseconds(100));
    registry.Tick();
  }
  EXPECT_EQ(registry.GetJob("j1", false)->registered_nodes(), 1);
  clock.Advance(absl::Milliseconds(200));
  registry.Tick();
  EXPECT_EQ(registry.GetJob("j1", false)->registered_nodes(), 0);
}

// The coordinator dropped heartbeats unread (its UDP receive queue was full):
// while it does, no node's silence counts; once it stops, a silent node is
// lost a full heartbeat timeout after the last drop, and one that keeps
// heartbeating is never lost.
TEST(JobRegistry, Tick_WhileHeartbeatsAreDroppedUnread_NoNodeLostForTheirSilence) {
  FakeClock clock;
  JobRegistryOptions options;
  int64_t dropped_since_last_tick = 0;
  int asked = 0;
  options.take_dropped_heartbeats = [&] {
    ++asked;
    return std::exchange(dropped_since_last_tick, 0);
  };
  JobRegistry registry(clock, nullptr, options);
  StartTwoNodeJob(registry);
  auto run = [&](absl::Duration for_how_long, int64_t drops_per_tick) {
    for (absl::Duration t; t < for_how_long; t += absl::Milliseconds(100)) {
      clock.Advance(absl::Milliseconds(100));
      ASSERT_TRUE(registry.Heartbeat(Ref("j", "a", 1, 1)).ok());
      dropped_since_last_tick = drops_per_tick;
      registry.Tick();
    }
  };
  run(absl::Seconds(10), 5);  // b silent for 10 s, but heartbeats went unread all along
  EXPECT_EQ(registry.GetJob("j", false)->registered_nodes(), 2);
  EXPECT_EQ(registry.GetJob("j", false)->state(), v1::RUNNING);
  EXPECT_EQ(asked, 100);
  run(absl::Milliseconds(2900), 0);  // nothing dropped: b's silence counts from the last drop
  EXPECT_EQ(registry.GetJob("j", false)->registered_nodes(), 2);
  clock.Advance(absl::Milliseconds(200));
  registry.Tick();
  EXPECT_EQ(registry.GetJob("j", false)->registered_nodes(), 1);
  EXPECT_FALSE(registry.Heartbeat(Ref("j", "b", 2, 1)).ok());  // b was the one lost
}

// The coordinator's jobs run on SteadyWallClock: someone sets the wall clock
// an hour ahead (or back) while nodes heartbeat: nobody is declared lost, and
// a silent node is still lost heartbeat_timeout after its last heartbeat.
TEST(JobRegistry, WallClockSteps_NoNodeLostAndTimeoutsUnchanged) {
  FakeClock wall(absl::FromUnixSeconds(1'800'000'000));
  FakeClock monotonic(absl::FromUnixSeconds(100));
  SteadyWallClock clock(wall, monotonic);
  JobRegistryOptions options;
  options.stall_threshold = absl::Seconds(1);
  JobRegistry registry(clock, nullptr, options);
  ASSERT_TRUE(registry.Register(Req("j1", "a", 1, Settings(1, 2))).ok());
  ASSERT_TRUE(registry.Register(Req("j1", "b", 2, Settings(1, 2))).ok());
  auto run = [&](absl::Duration for_how_long, bool b_heartbeats) {
    for (absl::Duration t; t < for_how_long; t += absl::Milliseconds(100)) {
      monotonic.Advance(absl::Milliseconds(100));
      wall.Advance(absl::Milliseconds(100));
      ASSERT_TRUE(registry.Heartbeat(Ref("j1", "a", 1, 0)).ok());
      if (b_heartbeats) {
        ASSERT_TRUE(registry.Heartbeat(Ref("j1", "b", 2, 0)).ok());
      }
      registry.Tick();
    }
  };
  run(absl::Seconds(1), true);
  wall.Advance(absl::Hours(1));
  run(absl::Seconds(1), true);
  wall.Advance(-absl::Hours(3));
  run(absl::Seconds(1), true);
  EXPECT_EQ(registry.GetJob("j1", false)->registered_nodes(), 2);
  run(absl::Milliseconds(2900), false);  // b silent: not yet
  EXPECT_EQ(registry.GetJob("j1", false)->registered_nodes(), 2);
  run(absl::Milliseconds(300), false);
  EXPECT_EQ(registry.GetJob("j1", false)->registered_nodes(), 1);
}

// A coordinator that may no longer lead answers no Register and no
// Heartbeat: both would renew a lease the new leader does not know about.
TEST(JobRegistry, ServingCheckFails_RegisterAndHeartbeatRefused) {
  FakeClock clock;
  JobRegistryOptions options;
  bool leading = true;
  options.serving_check = [&leading] {
    return leading ? absl::OkStatus()
                   : absl::UnavailableError("this coordinator is no longer the leader");
  };
  JobRegistry registry(clock, nullptr, options);
  ASSERT_TRUE(registry.Register(Req("j1", "a", 1, Settings(2, 2))).ok());
  ASSERT_TRUE(registry.Heartbeat(Ref("j1", "a", 1, 0)).ok());
  leading = false;
  absl::StatusOr<Generation> heartbeat = registry.Heartbeat(Ref("j1", "a", 1, 0));
  EXPECT_EQ(heartbeat.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(heartbeat.status().message().find("no longer the leader"), std::string::npos);
  EXPECT_EQ(registry.Register(Req("j1", "a", 1, Settings(2, 2))).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(registry.Register(Req("j1", "b", 2, Settings(2, 2))).status().code(),
            absl::StatusCode::kUnavailable);
}

// Issue 23.1, job reads: a deposed leader answers no read (its state may be
// stale); with a store, GetJob, ListJobs and EventsSince check after reading.
TEST(JobRegistry, ServingCheckFails_ReadsRefused) {
  FakeClock clock;
  InMemoryJobStateStore store;
  JobRegistryOptions options;
  bool leading = true;
  options.serving_check = [&leading] {
    return leading ? absl::OkStatus() : absl::UnavailableError("not the leader");
  };
  JobRegistry registry(clock, &store, options);
  ASSERT_TRUE(registry.Register(Req("j1", "a", 1, Settings(2, 2))).ok());
  ASSERT_TRUE(registry.PersistPending().ok());
  (void)registry.TakeOutbox();
  ASSERT_TRUE(registry.GetJob("j1", false).ok());
  ASSERT_TRUE(registry.ListJobs().ok());
  ASSERT_TRUE(registry.EventsSince("j1", 0, 10).ok());
  leading = false;
  EXPECT_EQ(registry.GetJob("j1", false).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(registry.ListJobs().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(registry.EventsSince("j1", 0, 10).status().code(), absl::StatusCode::kUnavailable);
}

TEST(JobRegistry, ConcurrentRegistrations_AllCounted) {
  FakeClock clock;
  JobRegistry registry(clock, nullptr, {});
  ASSERT_TRUE(registry.CreateJob("j", Settings(1, 1024)).ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::string id = absl::StrCat("n", t, "-", i);
        if (!registry.Register(Req("j", id, 1)).ok()) ++failures;
        if (!registry.Heartbeat(Ref("j", id, 1, 0)).ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(registry.GetJob("j", false)->registered_nodes(), 800);
}

TEST(JobRegistry, RestoreAfterCoordinatorRestart_ResumedNodesKeepGeneration) {
  FakeClock clock;
  InMemoryJobStateStore store;
  std::vector<JobEvent> before;
  {
    JobRegistry registry(clock, &store, {});
    ASSERT_TRUE(registry.Register(Req("j", "a", 11, Settings(2, 3, 2))).ok());
    ASSERT_TRUE(registry.Register(Req("j", "b", 22, Settings(2, 3, 2))).ok());
    ASSERT_TRUE(registry.Register(Req("j", "c", 33, Settings(2, 3, 2))).ok());
    ASSERT_TRUE(
        registry.ReportMasterInfo(Ref("j", "a", 11, 1), NewMasterInfo("", 29500, NcclId('q')))
            .ok());
    ASSERT_TRUE(
        registry.WorkerExited(Ref("j", "b", 22, 1), Exit(0, 1, 0, "boom", clock.Now())).ok());
    for (auto [n, inc] : {std::pair{"a", 11}, {"b", 22}, {"c", 33}}) {
      ASSERT_TRUE(registry.WorkersStopped(Ref("j", n, inc, 1)).ok());
    }
    ASSERT_TRUE(
        registry.ReportMasterInfo(Ref("j", "a", 11, 2), NewMasterInfo("", 29501, NcclId('r')))
            .ok());
    ASSERT_TRUE(registry.PersistPending().ok());  // the coordinator's writer
    ASSERT_EQ(registry.GetJob("j", false)->state(), v1::RUNNING);
    registry.TakeOutbox();  // delivered: WatchJob sees them
    auto events = registry.EventsSince("j", 0, 100);
    ASSERT_TRUE(events.ok()) << events.status();
    ASSERT_EQ(events->size(), 8u);
    before = *events;
  }
  clock.Advance(absl::Seconds(30));  // the coordinator was down for a while
  JobRegistry restarted(clock, &store, {});
  ASSERT_TRUE(restarted.Restore().ok());
  // The events survive: the same indexes and contents as before the restart.
  auto kept = restarted.EventsSince("j", 0, 100);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(testing::EventFields(*kept), testing::EventFields(before));
  EXPECT_EQ(restarted.GetJob("j", false)->first_event_index(), 1);
  auto status = restarted.GetJob("j", true);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->state(), v1::RUNNING);
  EXPECT_EQ(status->generation(), 2);
  EXPECT_EQ(status->restart_count(), 1);
  ASSERT_EQ(status->failures_size(), 1u);
  EXPECT_EQ(status->failures(0).message(), "boom");
  // a and b resume within the heartbeat timeout; c never comes back.
  clock.Advance(absl::Seconds(1));
  auto resumed = restarted.Register(Req("j", "a", 11, Settings(2, 3, 2)));
  ASSERT_TRUE(resumed.ok());
  EXPECT_TRUE(resumed->resumed);
  EXPECT_EQ(resumed->generation, 2);
  ASSERT_TRUE(restarted.Register(Req("j", "b", 22)).ok());
  ASSERT_TRUE(restarted.PersistPending().ok());
  Outbox out = restarted.TakeOutbox();
  EXPECT_TRUE(MessagesOf<StopWorkers>(out).empty());
  auto assignment = MessagesOf<Assignment>(out, "b");
  ASSERT_EQ(assignment.size(), 1u);
  EXPECT_EQ(assignment[0].generation, 2);
  EXPECT_EQ(assignment[0].group_rank, 1);
  EXPECT_EQ(assignment[0].master_port, 29501);
  EXPECT_EQ(assignment[0].nccl_unique_id, NcclId('r'));
  EXPECT_EQ(assignment[0].restart_count, 1);
  for (int i = 0; i < 4; ++i) {
    clock.Advance(absl::Milliseconds(500));
    ASSERT_TRUE(restarted.Heartbeat(Ref("j", "a", 11, 2)).ok());
    ASSERT_TRUE(restarted.Heartbeat(Ref("j", "b", 22, 2)).ok());
    restarted.Tick();
  }
  // c missed the heartbeat timeout after the restart: lost, restart without it.
  ASSERT_TRUE(restarted.PersistPending().ok());
  status = restarted.GetJob("j", false);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->state(), v1::RESTARTING);
  EXPECT_EQ(status->registered_nodes(), 2);
  EXPECT_EQ(status->restart_count(), 1);  // node loss is free
  // Event numbering continues across the restart, after the kept events.
  restarted.TakeOutbox();
  auto events = restarted.EventsSince("j", 0, 100);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_GT(events->size(), before.size());
  EXPECT_EQ((*events)[8].index(), 9);  // 8 events before the restart
  events->resize(before.size());
  EXPECT_EQ(testing::EventFields(*events), testing::EventFields(before));
}

TEST(JobRegistry, RestoreDuringStopBarrier_ResendsStopAndCompletes) {
  FakeClock clock;
  InMemoryJobStateStore store;
  {
    JobRegistry registry(clock, &store, {});
    ASSERT_NO_FATAL_FAILURE(StartTwoNodeJob(registry));
    ASSERT_TRUE(registry.WorkerExited(Ref("j", "a", 1, 1), Exit(0, 1, 0, "x", clock.Now())).ok());
    ASSERT_TRUE(registry.WorkersStopped(Ref("j", "a", 1, 1)).ok());
    ASSERT_TRUE(registry.PersistPending().ok());
  }
  JobRegistry restarted(clock, &store, {});
  ASSERT_TRUE(restarted.Restore().ok());
  ASSERT_TRUE(restarted.PersistPending().ok());
  EXPECT_EQ(restarted.GetJob("j", false)->state(), v1::RESTARTING);
  ASSERT_TRUE(restarted.Register(Req("j", "a", 1)).ok());
  ASSERT_TRUE(restarted.Register(Req("j", "b", 2)).ok());
  ASSERT_TRUE(restarted.PersistPending().ok());
  Outbox out = restarted.TakeOutbox();
  EXPECT_EQ(MessagesOf<StopWorkers>(out, "a").size(), 1u);
  EXPECT_EQ(MessagesOf<StopWorkers>(out, "b").size(), 1u);
  ASSERT_TRUE(restarted.WorkersStopped(Ref("j", "a", 1, 1)).ok());
  ASSERT_TRUE(restarted.WorkersStopped(Ref("j", "b", 2, 1)).ok());
  ASSERT_TRUE(restarted.PersistPending().ok());
  EXPECT_EQ(restarted.GetJob("j", false)->state(), v1::STARTING);
  EXPECT_EQ(restarted.GetJob("j", false)->generation(), 2);
}

// A finished job shows its last generation's members and world size (issue
// 25.5), after a coordinator restart as before it.
TEST(JobRegistry, RestoreFinishedJob_ShowsItsLastMembersAndWorldSize) {
  FakeClock clock;
  InMemoryJobStateStore store;
  v1::Job before;
  {
    JobRegistry registry(clock, &store, {});
    ASSERT_NO_FATAL_FAILURE(StartTwoNodeJob(registry));
    for (auto [n, inc] : {std::pair{"a", 1}, {"b", 2}}) {
      for (int local_rank = 0; local_rank < 2; ++local_rank) {  // nproc 2 each
        ASSERT_TRUE(
            registry.WorkerExited(Ref("j", n, inc, 1), Exit(local_rank, 0, 0, "", clock.Now()))
                .ok());
      }
    }
    ASSERT_TRUE(registry.PersistPending().ok());
    before = *registry.GetJob("j", true);
    ASSERT_EQ(before.state(), v1::SUCCEEDED);
    ASSERT_EQ(before.world_size(), 4);
    ASSERT_EQ(before.member_count(), 2);
  }
  JobRegistry restarted(clock, &store, {});
  ASSERT_TRUE(restarted.Restore().ok());
  const v1::Job after = *restarted.GetJob("j", true);
  EXPECT_EQ(after.state(), v1::SUCCEEDED);
  EXPECT_EQ(after.world_size(), 4);
  EXPECT_EQ(after.member_count(), 2);
  ASSERT_EQ(after.members_size(), before.members_size());
  for (int i = 0; i < after.members_size(); ++i) {
    EXPECT_EQ(after.members(i).node_id(), before.members(i).node_id());
    EXPECT_EQ(after.members(i).group_rank(), before.members(i).group_rank());
  }
  // Stored again (any later write of the job), the world size is kept.
  ASSERT_TRUE(restarted.PersistPending().ok());
  JobRegistry again(clock, &store, {});
  ASSERT_TRUE(again.Restore().ok());
  EXPECT_EQ(again.GetJob("j", false)->world_size(), 4);
}

// A job that finished while waiting for nodes (no generation formed) has no
// members after a coordinator restart either.
TEST(JobRegistry, RestoreJobFinishedWhileWaiting_NoMembersAsBefore) {
  FakeClock clock;
  InMemoryJobStateStore store;
  v1::Job before;
  {
    JobRegistry registry(clock, &store, {});
    ASSERT_NO_FATAL_FAILURE(StartTwoNodeJob(registry));
    for (int i = 0; i < 8; ++i) {  // b falls silent: lost, the generation stops without it
      clock.Advance(absl::Milliseconds(500));
      ASSERT_TRUE(registry.Heartbeat(Ref("j", "a", 1, 1)).ok());
      registry.Tick();
    }
    ASSERT_TRUE(registry.WorkersStopped(Ref("j", "a", 1, 1)).ok());
    ASSERT_TRUE(registry.PersistPending().ok());
    ASSERT_EQ(registry.GetJob("j", false)->state(), v1::WAITING);
    clock.Advance(absl::Minutes(11));  // past the 10 min join timeout: the job fails
    registry.Tick();
    ASSERT_TRUE(registry.PersistPending().ok());
    before = *registry.GetJob("j", true);
    ASSERT_EQ(before.state(), v1::FAILED);
    ASSERT_EQ(before.member_count(), 0);
  }
  JobRegistry restarted(clock, &store, {});
  ASSERT_TRUE(restarted.Restore().ok());
  const v1::Job after = *restarted.GetJob("j", true);
  EXPECT_EQ(after.member_count(), before.member_count());
  EXPECT_EQ(after.member_count(), 0);
  EXPECT_EQ(after.world_size(), before.world_size());
}

TEST(JobRegistry, RestoreDuringStopBarrierAfterAMemberWasRemoved_WaitsForItsLease) {
  FakeClock clock;
  InMemoryJobStateStore store;
  {
    JobRegistry registry(clock, &store, {});
    for (const auto& [node, incarnation] : {std::pair{"a", 1}, {"b", 2}, {"c", 3}}) {
      ASSERT_TRUE(registry.Register(Req("j", node, incarnation, Settings(2, 3))).ok());
    }
    ASSERT_TRUE(
        registry.ReportMasterInfo(Ref("j", "a", 1, 1), NewMasterInfo("", 29500, NcclId())).ok());
    // c's workers may still run.
    const absl::Status excluded =
        testing::WhileWriting(registry, [&] { return registry.ExcludeNode("j", "c", "bad GPU"); });
    ASSERT_TRUE(excluded.ok()) << excluded;
  }
  JobRegistry restarted(clock, &store, {});
  ASSERT_TRUE(restarted.Restore().ok());
  ASSERT_TRUE(restarted.Register(Req("j", "a", 1)).ok());
  ASSERT_TRUE(restarted.Register(Req("j", "b", 2)).ok());
  ASSERT_TRUE(restarted.WorkersStopped(Ref("j", "a", 1, 1)).ok());
  ASSERT_TRUE(restarted.WorkersStopped(Ref("j", "b", 2, 1)).ok());
  EXPECT_EQ(restarted.GetJob("j", false)->state(), v1::RESTARTING);
  for (int i = 0; i < 6; ++i) {
    clock.Advance(absl::Milliseconds(500));
    ASSERT_TRUE(restarted.Heartbeat(Ref("j", "a", 1, 1)).ok());
    ASSERT_TRUE(restarted.Heartbeat(Ref("j", "b", 2, 1)).ok());
    restarted.Tick();
  }
  ASSERT_TRUE(restarted.PersistPending().ok());
  EXPECT_EQ(restarted.GetJob("j", false)->state(), v1::STARTING);
}

TEST(JobRegistry, RestoreCorruptNode_DataLoss) {
  FakeClock clock;
  InMemoryJobStateStore store;
  JobChanges c;
  c.job_id = "j";
  c.job = NewJobRecord("j", DefaultJobSettings(), clock.Now());
  SetJobState(JobState::kRunning, &*c.job);
  NodeRecord node = NewNodeRecord("");
  node.set_node_id("a");
  node.set_incarnation(1);
  node.set_group_rank(1000000000);
  c.upserted_nodes = {node};
  ASSERT_TRUE(store.Apply(c).ok());
  JobRegistry registry(clock, &store, {});
  EXPECT_EQ(registry.Restore().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ddp::rendezvous
