// The job-wide idle hang (idle_hang.h): every member node's workers idle for
// hang_timeout is a hang of the worker idle first; one member still working
// is not.

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "coordinator/rendezvous/job.h"
#include "coordinator/rendezvous/job_test_util.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

using testing::JobHarness;
using testing::MessagesOf;
using testing::Settings;
using testing::StartRunning;

std::vector<WorkerActivity> BothIdleSince(absl::Time rank0, absl::Time rank1) {
  return {{0, true, rank0}, {1, true, rank1}};
}

// Heartbeats from `nodes` every 500 ms for `d`, the job ticking.
void RunFor(JobHarness& h, const std::vector<std::string>& nodes, absl::Duration d) {
  for (absl::Duration t; t < d; t += absl::Milliseconds(500)) {
    h.clock().Advance(absl::Milliseconds(500));
    for (const std::string& n : nodes) (void)h.job().Heartbeat(h.Ref(n));
    h.job().Tick();
  }
}

TEST(JobIdleHang, EveryMemberIdle_HangOfTheFirstIdleWithStacks) {
  JobHarness h(Settings(2, 2));  // hang_timeout: 10 s by default
  StartRunning(h, {"a", "b"});
  const absl::Time t0 = h.clock().Now();
  // Rank 3 (b, local 1) stops; the others block in the collective a second
  // later.
  ASSERT_TRUE(h.job().ReportActivity(h.Ref("b"), BothIdleSince(t0 + absl::Seconds(1), t0)).ok());
  ASSERT_TRUE(
      h.job()
          .ReportActivity(h.Ref("a"), BothIdleSince(t0 + absl::Seconds(1), t0 + absl::Seconds(1)))
          .ok());
  RunFor(h, {"a", "b"}, absl::Seconds(11));
  EXPECT_EQ(h.job().state(), JobState::kRunning);  // every member idle for 10.0 s
  RunFor(h, {"a", "b"}, absl::Seconds(1));
  ASSERT_EQ(h.job().state(), JobState::kRestarting);
  EXPECT_EQ(h.job().restart_count(), 1);
  const v1::Job status = h.job().Status(false);
  const std::vector<FailureInfo> failures(status.failures().begin(), status.failures().end());
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_TRUE(failures[0].hang());
  EXPECT_EQ(failures[0].node_id(), "b");
  EXPECT_EQ(failures[0].global_rank(), 3);
  EXPECT_EQ(FailureTime(failures[0]), t0);
  EXPECT_TRUE(absl::StrContains(failures[0].message(), "no CPU or I/O for"))
      << failures[0].message();
  for (const char* node : {"a", "b"}) {
    const std::vector<StopWorkers> stops = MessagesOf<StopWorkers>(h.outbox(), node);
    ASSERT_EQ(stops.size(), 1u) << node;
    EXPECT_TRUE(stops[0].take_stacks) << node;
  }
}

// Rank 0 saves a checkpoint alone for a minute while node b waits: no hang.
TEST(JobIdleHang, OneMemberActive_NoHang) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  const absl::Time t0 = h.clock().Now();
  ASSERT_TRUE(h.job().ReportActivity(h.Ref("b"), BothIdleSince(t0, t0)).ok());
  ASSERT_TRUE(h.job().ReportActivity(h.Ref("a"), {{0, true, std::nullopt}, {1, true, t0}}).ok());
  RunFor(h, {"a", "b"}, absl::Seconds(60));
  EXPECT_EQ(h.job().state(), JobState::kRunning);
  // The checkpoint written, rank 0 waits too: idle from then on.
  const absl::Time saved = h.clock().Now();
  ASSERT_TRUE(h.job().ReportActivity(h.Ref("a"), BothIdleSince(saved, t0)).ok());
  RunFor(h, {"a", "b"}, absl::Seconds(10));
  EXPECT_EQ(h.job().state(), JobState::kRunning);
  RunFor(h, {"a", "b"}, absl::Seconds(1));
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
}

TEST(JobIdleHang, TimeoutZero_RuleOff) {
  JobSettings settings = Settings(2, 2);
  settings.set_hang_timeout_ms(0);
  JobHarness h(settings);
  StartRunning(h, {"a", "b"});
  const absl::Time t0 = h.clock().Now();
  for (const char* node : {"a", "b"}) {
    ASSERT_TRUE(h.job().ReportActivity(h.Ref(node), BothIdleSince(t0, t0)).ok());
  }
  RunFor(h, {"a", "b"}, absl::Seconds(60));
  EXPECT_EQ(h.job().state(), JobState::kRunning);
}

// A generation of one node: its agent decides, with its workers' evidence.
TEST(JobIdleHang, OneMember_LeftToItsAgent) {
  JobHarness h(Settings(1, 1));
  StartRunning(h, {"a"});
  const absl::Time t0 = h.clock().Now();
  ASSERT_TRUE(h.job().ReportActivity(h.Ref("a"), BothIdleSince(t0, t0)).ok());
  RunFor(h, {"a"}, absl::Seconds(60));
  EXPECT_EQ(h.job().state(), JobState::kRunning);
}

TEST(JobIdleHang, LocalRankOutsideTheNode_InvalidArgument) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  const absl::Status status = h.job().ReportActivity(h.Ref("a"), {{2, true, std::nullopt}});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "local rank 2")) << status;
}

// Idleness reported for an earlier generation does not carry over.
TEST(JobIdleHang, NewGeneration_StartsWithNothingKnown) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  const absl::Time t0 = h.clock().Now();
  for (const char* node : {"a", "b"}) {
    ASSERT_TRUE(h.job().ReportActivity(h.Ref(node), BothIdleSince(t0, t0)).ok());
  }
  RunFor(h, {"a", "b"}, absl::Seconds(11));
  ASSERT_EQ(h.job().state(), JobState::kRestarting);
  h.ConfirmStops();
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  ASSERT_EQ(h.job().state(), JobState::kRunning);
  RunFor(h, {"a", "b"}, absl::Seconds(60));
  EXPECT_EQ(h.job().state(), JobState::kRunning);
}

}  // namespace
}  // namespace ddp::rendezvous
