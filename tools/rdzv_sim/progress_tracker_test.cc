#include "tools/rdzv_sim/progress_tracker.h"

#include <thread>

#include "gtest/gtest.h"

namespace ddp::rdzv_sim {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);
const absl::Time kFarFuture = absl::InfiniteFuture();

TEST(ProgressTracker, WaitForAssignments_AllArrived_FirstAndLast) {
  ProgressTracker tracker(3);
  tracker.RecordAssignment(1, 1, kT0 + absl::Milliseconds(5));
  tracker.RecordAssignment(1, 1, kT0 + absl::Milliseconds(2));
  tracker.RecordAssignment(2, 2, kT0 + absl::Milliseconds(9));  // other wave
  tracker.RecordAssignment(1, 1, kT0 + absl::Milliseconds(7));
  absl::StatusOr<AssignmentWave> wave = tracker.WaitForAssignments(1, kFarFuture);
  ASSERT_TRUE(wave.ok()) << wave.status();
  EXPECT_EQ(wave->count, 3);
  EXPECT_EQ(wave->first, kT0 + absl::Milliseconds(2));
  EXPECT_EQ(wave->last, kT0 + absl::Milliseconds(7));
  EXPECT_EQ(wave->max_generation, 1);
}

TEST(ProgressTracker, WaitForAssignments_Missing_DeadlineExceededWithCount) {
  ProgressTracker tracker(3);
  tracker.RecordAssignment(1, 1, kT0);
  absl::StatusOr<AssignmentWave> wave = tracker.WaitForAssignments(1, absl::InfinitePast());
  EXPECT_EQ(wave.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(wave.status().message().find("only 1 of 3"), std::string::npos);
}

TEST(ProgressTracker, WaitForAssignments_Failure_ReturnsFirstFailure) {
  ProgressTracker tracker(2);
  tracker.RecordFailure("sim-1", absl::InvalidArgumentError("bad nproc"));
  tracker.RecordFailure("sim-2", absl::UnavailableError("later"));
  absl::StatusOr<AssignmentWave> wave = tracker.WaitForAssignments(1, kFarFuture);
  EXPECT_EQ(wave.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wave.status().message().find("sim-1"), std::string::npos);
  EXPECT_EQ(tracker.failures(), 2);
}

TEST(ProgressTracker, WaitForAssignments_MixedGenerations_FailedPrecondition) {
  ProgressTracker tracker(2);
  tracker.RecordAssignment(1, 1, kT0);
  tracker.RecordAssignment(1, 2, kT0);
  EXPECT_EQ(tracker.WaitForAssignments(1, kFarFuture).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ProgressTracker, WaitForAssignments_ArrivesFromOtherThread_Wakes) {
  ProgressTracker tracker(2);
  std::thread recorder([&tracker] {
    tracker.RecordAssignment(1, 1, kT0);
    tracker.RecordAssignment(1, 1, kT0);
  });
  absl::StatusOr<AssignmentWave> wave = tracker.WaitForAssignments(1, kFarFuture);
  recorder.join();
  ASSERT_TRUE(wave.ok());
  EXPECT_EQ(wave->count, 2);
}

TEST(ProgressTracker, WaitForStreamsDone_CountsDone) {
  ProgressTracker tracker(2);
  tracker.RecordStreamDone();
  EXPECT_FALSE(tracker.WaitForStreamsDone(absl::InfinitePast()));
  tracker.RecordStreamDone();
  EXPECT_TRUE(tracker.WaitForStreamsDone(absl::InfinitePast()));
  EXPECT_EQ(tracker.streams_done(), 2);
}

TEST(ProgressTracker, RecordRegistered_KeepsRoundTrips) {
  ProgressTracker tracker(2);
  tracker.RecordRegistered(absl::Milliseconds(1));
  tracker.RecordRegistered(absl::Milliseconds(4));
  EXPECT_EQ(tracker.registration_round_trips(),
            (std::vector<absl::Duration>{absl::Milliseconds(1), absl::Milliseconds(4)}));
}

}  // namespace
}  // namespace ddp::rdzv_sim
