#include "coordinator/rendezvous/job_settings.h"

#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

TEST(ValidateJobSettings, Defaults_Ok) {
  EXPECT_TRUE(ValidateJobSettings(JobSettings(), RendezvousLimits()).ok());
}

TEST(ValidateJobSettings, MaxBelowMin_InvalidArgumentNamesBoth) {
  JobSettings s;
  s.min_nodes = 4;
  s.max_nodes = 2;
  absl::Status status = ValidateJobSettings(s, RendezvousLimits());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("max_nodes=2"), std::string::npos);
  EXPECT_NE(status.message().find("min_nodes=4"), std::string::npos);
}

TEST(ValidateJobSettings, OverLimits_InvalidArgumentNamesLimit) {
  RendezvousLimits limits;
  JobSettings s;
  s.max_nodes = limits.max_nodes + 1;
  absl::Status status = ValidateJobSettings(s, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("65536"), std::string::npos);

  s = JobSettings();
  s.nproc_per_node = 0;
  EXPECT_EQ(ValidateJobSettings(s, limits).code(), absl::StatusCode::kInvalidArgument);
  s.nproc_per_node = limits.max_nproc_per_node + 1;
  EXPECT_EQ(ValidateJobSettings(s, limits).code(), absl::StatusCode::kInvalidArgument);
  s = JobSettings();
  s.min_nodes = 0;
  EXPECT_EQ(ValidateJobSettings(s, limits).code(), absl::StatusCode::kInvalidArgument);
  s = JobSettings();
  s.max_restarts = -1;
  EXPECT_EQ(ValidateJobSettings(s, limits).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValidateJobSettings, StragglerExclusion_OffOrInRange) {
  RendezvousLimits limits;
  JobSettings s;
  s.straggler_exclude_factor = 1.5;
  s.straggler_exclude_after = absl::Seconds(20);
  EXPECT_TRUE(ValidateJobSettings(s, limits).ok());
  s.straggler_exclude_factor = 1.05;
  absl::Status status = ValidateJobSettings(s, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("straggler_exclude_factor=1.05"), std::string::npos) << status;
  EXPECT_NE(status.message().find("1.1"), std::string::npos) << status;
  s.straggler_exclude_factor = 101;
  EXPECT_EQ(ValidateJobSettings(s, limits).code(), absl::StatusCode::kInvalidArgument);
  s.straggler_exclude_factor = 2;
  s.straggler_exclude_after = absl::ZeroDuration();
  status = ValidateJobSettings(s, limits);
  EXPECT_NE(status.message().find("straggler_exclude_after"), std::string::npos) << status;
  s.straggler_exclude_factor = 0;  // off: the duration is not looked at
  EXPECT_TRUE(ValidateJobSettings(s, limits).ok());
}

TEST(RequestedSettings, StragglerExclusion_RoundTripsAndDefaultsOff) {
  v1::JobSettings proto;
  JobSettings s = RequestedSettings(proto);
  EXPECT_EQ(s.straggler_exclude_factor, 0);
  EXPECT_EQ(s.straggler_exclude_after, absl::ZeroDuration());
  proto.set_straggler_exclude_factor(1.4);
  EXPECT_EQ(RequestedSettings(proto).straggler_exclude_after, kDefaultStragglerExcludeAfter);
  proto.set_straggler_exclude_after_ms(5000);
  s = RequestedSettings(proto);
  EXPECT_EQ(s.straggler_exclude_factor, 1.4);
  EXPECT_EQ(s.straggler_exclude_after, absl::Seconds(5));
  v1::JobSettings out;
  SettingsToProto(s, &out);
  EXPECT_EQ(SettingsFromProto(out), s);
}

TEST(ValidateJobSettings, HangTimeout_OffOrInRange) {
  RendezvousLimits limits;
  JobSettings s;
  EXPECT_EQ(s.hang_timeout, kDefaultHangTimeout);
  s.hang_timeout = absl::ZeroDuration();  // off
  EXPECT_TRUE(ValidateJobSettings(s, limits).ok());
  s.hang_timeout = kMinHangTimeout;
  EXPECT_TRUE(ValidateJobSettings(s, limits).ok());
  s.hang_timeout = absl::Milliseconds(1500);
  absl::Status status = ValidateJobSettings(s, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("hang_timeout (0 turns it off)=1.5s"), std::string::npos)
      << status;
  EXPECT_NE(status.message().find(">= 2s"), std::string::npos) << status;
  s.hang_timeout = limits.max_timeout + absl::Seconds(1);
  status = ValidateJobSettings(s, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("<= 168h"), std::string::npos) << status;
  s.hang_timeout = -absl::Seconds(1);
  EXPECT_EQ(ValidateJobSettings(s, limits).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RequestedSettings, HangTimeout_UnsetIsTheDefaultZeroIsOff) {
  v1::JobSettings proto;
  EXPECT_EQ(RequestedSettings(proto).hang_timeout, kDefaultHangTimeout);
  proto.set_hang_timeout_ms(0);
  EXPECT_EQ(RequestedSettings(proto).hang_timeout, absl::ZeroDuration());
  proto.set_hang_timeout_ms(30000);
  const JobSettings s = RequestedSettings(proto);
  EXPECT_EQ(s.hang_timeout, absl::Seconds(30));
  v1::JobSettings out;
  SettingsToProto(s, &out);
  EXPECT_EQ(SettingsFromProto(out), s);
  // A record stored before the setting existed.
  out.clear_hang_timeout_ms();
  EXPECT_EQ(SettingsFromProto(out).hang_timeout, kDefaultHangTimeout);
}

TEST(ValidateJobSettings, BadTimeouts_InvalidArgument) {
  RendezvousLimits limits;
  JobSettings s;
  s.heartbeat_timeout = s.heartbeat_interval;  // needs >= 2x
  absl::Status status = ValidateJobSettings(s, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("heartbeat_timeout"), std::string::npos);
  s = JobSettings();
  s.heartbeat_interval = absl::Microseconds(1);
  EXPECT_FALSE(ValidateJobSettings(s, limits).ok());
  s = JobSettings();
  s.join_timeout = absl::ZeroDuration();
  EXPECT_FALSE(ValidateJobSettings(s, limits).ok());
  s = JobSettings();
  s.last_call_timeout = s.join_timeout + absl::Seconds(1);
  EXPECT_FALSE(ValidateJobSettings(s, limits).ok());
  s = JobSettings();
  s.shutdown_timeout = absl::Hours(24 * 8);
  EXPECT_FALSE(ValidateJobSettings(s, limits).ok());
  s = JobSettings();
  s.last_call_timeout = absl::ZeroDuration();
  EXPECT_TRUE(ValidateJobSettings(s, limits).ok());
}

TEST(CheckCompatibleSettings, SameSizes_OkEvenWithOtherNproc) {
  JobSettings job, node;
  job.max_nodes = node.max_nodes = 4;
  node.nproc_per_node = 8;
  EXPECT_TRUE(CheckCompatibleSettings("j", job, "n", node).ok());
}

TEST(CheckCompatibleSettings, MaxNodesDiffer_FailedPreconditionNamesBoth) {
  JobSettings job, node;
  job.max_nodes = 4;
  node.max_nodes = 8;
  absl::Status status = CheckCompatibleSettings("j", job, "n", node);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("max_nodes=8"), std::string::npos);
  EXPECT_NE(status.message().find("max_nodes=4"), std::string::npos);
  node = job;
  node.max_restarts = 9;
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
  const JobSettings defaults;
  EXPECT_EQ(s.min_nodes, 3);
  EXPECT_EQ(s.max_nodes, 3);
  EXPECT_EQ(s.max_restarts, 0);
  EXPECT_EQ(s.nproc_per_node, defaults.nproc_per_node);
  EXPECT_EQ(s.join_timeout, defaults.join_timeout);
  EXPECT_EQ(s.last_call_timeout, defaults.last_call_timeout);
  EXPECT_EQ(s.heartbeat_timeout, defaults.heartbeat_timeout);
}

TEST(SettingsFromProto, StoredZeroLastCall_StaysZeroAndRoundTrips) {
  JobSettings stored;
  stored.min_nodes = 2;
  stored.max_nodes = 4;
  stored.last_call_timeout = absl::ZeroDuration();
  v1::JobSettings proto;
  SettingsToProto(stored, &proto);
  const JobSettings back = SettingsFromProto(proto);
  EXPECT_EQ(back, stored);
  EXPECT_EQ(back.last_call_timeout, absl::ZeroDuration());
  // The same bytes through RequestedSettings would take the default instead.
  EXPECT_NE(RequestedSettings(proto).last_call_timeout, absl::ZeroDuration());
}

}  // namespace
}  // namespace ddp::rendezvous
