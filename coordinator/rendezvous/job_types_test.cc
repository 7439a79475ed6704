#include "coordinator/rendezvous/job_types.h"

#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

TEST(MasterInfo, NewMasterInfo_SetsEveryField) {
  const MasterInfo info = NewMasterInfo("10.0.0.1", 29500, std::string(kNcclUniqueIdBytes, '\0'));
  EXPECT_EQ(info.master_addr(), "10.0.0.1");
  EXPECT_EQ(info.master_port(), 29500);
  EXPECT_EQ(info.nccl_unique_id(), std::string(kNcclUniqueIdBytes, '\0'));
}

TEST(JobStateFromProto, Unspecified_InvalidArgument) {
  EXPECT_EQ(JobStateFromProto(v1::JOB_STATE_UNSPECIFIED).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*JobStateFromProto(v1::RESTARTING), JobState::kRestarting);
}

TEST(JobStateToProto, EveryState_BackAndForth) {
  for (JobState state :
       {JobState::kWaiting, JobState::kStarting, JobState::kRunning, JobState::kRestarting,
        JobState::kSucceeded, JobState::kFailed, JobState::kCancelled}) {
    const v1::JobState api = JobStateToProto(state);
    EXPECT_EQ(*JobStateFromProto(api), state) << JobStateName(state);
    EXPECT_EQ(IsTerminal(api), IsTerminal(state)) << JobStateName(state);
  }
  EXPECT_EQ(JobStateToProto(JobState::kCancelled), v1::CANCELLED);
}

}  // namespace
}  // namespace ddp::rendezvous
