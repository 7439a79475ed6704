#include "coordinator/rendezvous/job_settings.h"

#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

TEST(ValidateJobSettings, Defaults_Ok) {
  EXPECT_TRUE(ValidateJobSettings(DefaultJobSettings(), RendezvousLimits()).ok());
}

TEST(ValidateJobSettings, MaxBelowMin_InvalidArgumentNamesBoth) {
  JobSettings s = DefaultJobSettings();
  s.set_min_nodes(4);
  s.set_max_nodes(2);
  absl::Status status = ValidateJobSettings(s, RendezvousLimits());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("max_nodes=2"), std::string::npos);
  EXPECT_NE(status.message().find("min_nodes=4"), std::string::npos);
}

TEST(ValidateJobSettings, OverLimits_InvalidArgumentNamesLimit) {
  RendezvousLimits limits;
  JobSettings s = DefaultJobSettings();
  s.set_max_nodes(limits.max_nodes + 1);
  absl::Status status = ValidateJobSettings(s, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("65536"), std::string::npos);

  s = DefaultJobSettings();
  s.set_nproc_per_node(0);
  EXPECT_EQ(ValidateJobSettings(s, limits).code(), absl::StatusCode::kInvalidArgument);
  s.set_nproc_per_node(limits.max_nproc_per_node + 1);
  EXPECT_EQ(ValidateJobSettings(s, limits).code(), absl::StatusCode::kInvalidArgument);
  s = DefaultJobSettings();
  s.set_min_nodes(0);
  EXPECT_EQ(ValidateJobSettings(s, limits).code(), absl::StatusCode::kInvalidArgument);
  s = DefaultJobSettings();
  s.set_max_restarts(-1);
  EXPECT_EQ(ValidateJobSettings(s, limits).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValidateJobSettings, StragglerExclusion_OffOrInRange) {
  RendezvousLimits limits;
  JobSettings s = DefaultJobSettings();
  s.set_straggler_exclude_factor(1.5);
  s.set_straggler_exclude_after_ms(20000);
  EXPECT_TRUE(ValidateJobSettings(s, limits).ok());
  s.set_straggler_exclude_factor(1.05);
  absl::Status status = ValidateJobSettings(s, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("straggler_exclude_factor=1.05"), std::string::npos) << status;
  EXPECT_NE(status.message().find("1.1"), std::string::npos) << status;
  s.set_straggler_exclude_factor(101);
  EXPECT_EQ(ValidateJobSettings(s, limits).code(), absl::StatusCode::kInvalidArgument);
  s.set_straggler_exclude_factor(2);
  s.set_straggler_exclude_after_ms(0);
  status = ValidateJobSettings(s, limits);
  EXPECT_NE(status.message().find("straggler_exclude_after"), std::string::npos) << status;
  s.set_straggler_exclude_factor(0);  // off: the duration is not looked at
  EXPECT_TRUE(ValidateJobSettings(s, limits).ok());
}

TEST(RequestedSettings, StragglerExclusion_KeptAndDefaultsOff) {
  v1::JobSettings proto;
  JobSettings s = RequestedSettings(proto);
  EXPECT_EQ(s.straggler_exclude_factor(), 0);
  EXPECT_EQ(StragglerExcludeAfter(s), absl::ZeroDuration());
  proto.set_straggler_exclude_factor(1.4);
  EXPECT_EQ(StragglerExcludeAfter(RequestedSettings(proto)), kDefaultStragglerExcludeAfter);
  proto.set_straggler_exclude_after_ms(5000);
  s = RequestedSettings(proto);
  EXPECT_EQ(s.straggler_exclude_factor(), 1.4);
  EXPECT_EQ(StragglerExcludeAfter(s), absl::Seconds(5));
}

TEST(ValidateJobSettings, HangTimeout_OffOrInRange) {
  RendezvousLimits limits;
  JobSettings s = DefaultJobSettings();
  EXPECT_EQ(HangTimeout(s), kDefaultHangTimeout);
  s.set_hang_timeout_ms(0);  // off
  EXPECT_TRUE(ValidateJobSettings(s, limits).ok());
  s.set_hang_timeout_ms(absl::ToInt64Milliseconds(kMinHangTimeout));
  EXPECT_TRUE(ValidateJobSettings(s, limits).ok());
  s.set_hang_timeout_ms(1500);
  absl::Status status = ValidateJobSettings(s, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("hang_timeout (0 turns it off)=1.5s"), std::string::npos)
      << status;
  EXPECT_NE(status.message().find(">= 2s"), std::string::npos) << status;
  s.set_hang_timeout_ms(absl::ToInt64Milliseconds(limits.max_timeout + absl::Seconds(1)));
  status = ValidateJobSettings(s, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("<= 168h"), std::string::npos) << status;
  s.set_hang_timeout_ms(absl::ToInt64Milliseconds(-absl::Seconds(1)));
  EXPECT_EQ(ValidateJobSettings(s, limits).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RequestedSettings, HangTimeout_UnsetIsTheDefaultZeroIsOff) {
  v1::JobSettings proto;
  // The request's settings hold the default itself (the API shows it).
  EXPECT_TRUE(RequestedSettings(proto).has_hang_timeout_ms());
  EXPECT_EQ(HangTimeout(RequestedSettings(proto)), kDefaultHangTimeout);
  proto.set_hang_timeout_ms(0);
  EXPECT_EQ(HangTimeout(RequestedSettings(proto)), absl::ZeroDuration());
  proto.set_hang_timeout_ms(30000);
  EXPECT_EQ(HangTimeout(RequestedSettings(proto)), absl::Seconds(30));
}

TEST(HangTimeout, StoredBeforeTheSettingExisted_TheDefault) {
  JobSettings stored = DefaultJobSettings();
  stored.clear_hang_timeout_ms();
  EXPECT_EQ(HangTimeout(stored), kDefaultHangTimeout);
  EXPECT_TRUE(ValidateJobSettings(stored, RendezvousLimits()).ok());
}

TEST(ValidateJobSettings, BadTimeouts_InvalidArgument) {
  RendezvousLimits limits;
  JobSettings s = DefaultJobSettings();
  s.set_heartbeat_timeout_ms(s.heartbeat_interval_ms());  // needs >= 2x
  absl::Status status = ValidateJobSettings(s, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("heartbeat_timeout"), std::string::npos);
  s = DefaultJobSettings();
  s.set_heartbeat_interval_ms(1);  // below min_heartbeat_interval (10 ms)
  EXPECT_FALSE(ValidateJobSettings(s, limits).ok());
  s = DefaultJobSettings();
  s.set_join_timeout_ms(0);
  EXPECT_FALSE(ValidateJobSettings(s, limits).ok());
  s = DefaultJobSettings();
  s.set_last_call_timeout_ms(s.join_timeout_ms() + 1000);
  EXPECT_FALSE(ValidateJobSettings(s, limits).ok());
  s = DefaultJobSettings();
  s.set_shutdown_timeout_ms(absl::ToInt64Milliseconds(absl::Hours(24 * 8)));
  EXPECT_FALSE(ValidateJobSettings(s, limits).ok());
  s = DefaultJobSettings();
  s.set_last_call_timeout_ms(0);
  EXPECT_TRUE(ValidateJobSettings(s, limits).ok());
}

TEST(CheckCompatibleSettings, SameSizes_OkEvenWithOtherNproc) {
  JobSettings job = DefaultJobSettings();
  job.set_max_nodes(4);
  JobSettings node = job;
  node.set_nproc_per_node(8);
  EXPECT_TRUE(CheckCompatibleSettings("j", job, "n", node).ok());
}

TEST(CheckCompatibleSettings, MaxNodesDiffer_FailedPreconditionNamesBoth) {
  JobSettings job = DefaultJobSettings();
  JobSettings node = DefaultJobSettings();
  job.set_max_nodes(4);
  node.set_max_nodes(8);
  absl::Status status = CheckCompatibleSettings("j", job, "n", node);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("max_nodes=8"), std::string::npos);
  EXPECT_NE(status.message().find("max_nodes=4"), std::string::npos);
  node = job;
  node.set_max_restarts(9);
  EXPECT_EQ(CheckCompatibleSettings("j", job, "n", node).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ValidateId, BadIds_InvalidArgument) {
  RendezvousLimits limits;
  EXPECT_TRUE(ValidateId("node-1.rack_2:a", "node id", limits).ok());
  EXPECT_EQ(ValidateId("", "node id", limits).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateId("a b", "node id", limits).code(), absl::StatusCode::kInvalidArgument);
  absl::Status status = ValidateId(std::string(300, 'a'), "job id", limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(status.message().size(), 200u);  // offending value is capped
}

TEST(RequestedSettings, UnsetFields_TakeDefaultsMaxNodesFollowsMinRestartsStayZero) {
  v1::JobSettings request;
  request.set_min_nodes(3);
  const JobSettings s = RequestedSettings(request);
  const JobSettings defaults = DefaultJobSettings();
  EXPECT_EQ(s.min_nodes(), 3);
  EXPECT_EQ(s.max_nodes(), 3);
  EXPECT_EQ(s.max_restarts(), 0);
  EXPECT_EQ(s.nproc_per_node(), defaults.nproc_per_node());
  EXPECT_EQ(s.join_timeout_ms(), defaults.join_timeout_ms());
  EXPECT_EQ(s.last_call_timeout_ms(), defaults.last_call_timeout_ms());
  EXPECT_EQ(s.heartbeat_interval_ms(), defaults.heartbeat_interval_ms());
  EXPECT_EQ(s.heartbeat_timeout_ms(), defaults.heartbeat_timeout_ms());
  EXPECT_EQ(s.shutdown_timeout_ms(), defaults.shutdown_timeout_ms());
  EXPECT_EQ(s.hang_timeout_ms(), defaults.hang_timeout_ms());
}

TEST(RequestedSettings, EveryFieldSet_KeptAsGiven) {
  v1::JobSettings request;
  request.set_min_nodes(2);
  request.set_max_nodes(4);
  request.set_nproc_per_node(8);
  request.set_max_restarts(3);
  request.set_join_timeout_ms(600000);
  request.set_last_call_timeout_ms(30000);
  request.set_heartbeat_interval_ms(500);
  request.set_heartbeat_timeout_ms(3000);
  request.set_shutdown_timeout_ms(30000);
  request.set_straggler_exclude_factor(2);
  request.set_straggler_exclude_after_ms(7000);
  request.set_hang_timeout_ms(20000);
  const JobSettings s = RequestedSettings(request);
  EXPECT_EQ(s.SerializeAsString(), request.SerializeAsString());
  EXPECT_EQ(HangTimeout(s), absl::Seconds(20));
  EXPECT_EQ(HeartbeatInterval(s), absl::Milliseconds(500));
  EXPECT_EQ(JoinTimeout(s), absl::Seconds(600));
  EXPECT_EQ(StragglerExcludeAfter(s), absl::Seconds(7));
}

TEST(RequestedSettings, ZeroLastCall_TakesTheDefaultAStoredZeroStays) {
  JobSettings stored = DefaultJobSettings();
  stored.set_min_nodes(2);
  stored.set_max_nodes(4);
  stored.set_last_call_timeout_ms(0);
  // A stored record is taken as it is: 0 is "close at once".
  EXPECT_EQ(LastCallTimeout(stored), absl::ZeroDuration());
  EXPECT_TRUE(ValidateJobSettings(stored, RendezvousLimits()).ok());
  // The same bytes as a request: proto3's 0 is "unset", the default.
  EXPECT_EQ(RequestedSettings(stored).last_call_timeout_ms(),
            DefaultJobSettings().last_call_timeout_ms());
}

}  // namespace
}  // namespace ddp::rendezvous
