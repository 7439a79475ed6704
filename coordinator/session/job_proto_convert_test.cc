#include "coordinator/session/job_proto_convert.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::session {
namespace {

using ::testing::HasSubstr;

TEST(MasterInfoFromProto, NcclIdSizes_OnlyEmptyOr128Accepted) {
  rendezvous::RendezvousLimits limits;
  v1::MasterInfo proto;
  proto.set_master_port(29500);
  proto.set_nccl_unique_id(std::string(128, 'a'));
  absl::StatusOr<rendezvous::MasterInfo> info = MasterInfoFromProto(proto, limits);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->nccl_unique_id().size(), 128u);
  EXPECT_EQ(info->master_port(), 29500);

  proto.set_nccl_unique_id("");
  EXPECT_TRUE(MasterInfoFromProto(proto, limits).ok());

  proto.set_nccl_unique_id(std::string(129, 'a'));
  absl::Status status = MasterInfoFromProto(proto, limits).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("129 bytes"));

  proto.set_nccl_unique_id("");
  proto.set_master_addr(std::string(300, 'h'));
  status = MasterInfoFromProto(proto, limits).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("the limit is 255"));
}

TEST(RegisterFromProto, OversizedFields_InvalidArgumentNamingTheField) {
  rendezvous::RendezvousLimits limits;
  v1::Register proto;
  proto.set_job_id("job");
  proto.set_node_id("node");
  proto.set_incarnation(7);
  proto.set_address("10.0.0.1");
  absl::StatusOr<rendezvous::RegisterRequest> r = RegisterFromProto(proto, limits);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->incarnation, 7u);
  EXPECT_FALSE(r->settings.has_value());

  proto.mutable_settings()->set_min_nodes(1);
  r = RegisterFromProto(proto, limits);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->settings.has_value());

  // Ids and the address are checked once, by the core (job_registry_test).
  v1::Register long_job = proto;
  long_job.set_job_id(std::string(254, 'j'));
  EXPECT_TRUE(RegisterFromProto(long_job, limits).ok());
  v1::Register long_token = proto;
  long_token.set_token(std::string(kMaxTokenBytes + 1, 't'));
  EXPECT_THAT(RegisterFromProto(long_token, limits).status().message(), HasSubstr("token"));
}

TEST(NodeRefFromProto, NegativeGeneration_InvalidArgument) {
  v1::NodeHeader header;
  header.set_job_id("j");
  header.set_node_id("n");
  header.set_incarnation(3);
  header.set_generation(-1);
  EXPECT_EQ(NodeRefFromProto(header, {}).status().code(), absl::StatusCode::kInvalidArgument);
  header.set_generation(4);
  absl::StatusOr<rendezvous::NodeRef> ref = NodeRefFromProto(header, {});
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->generation, 4);
  EXPECT_EQ(ref->incarnation, 3u);
}

TEST(WorkerExitFromProto, Hang_FlagKeptNoExitCodeMessageCapped) {
  rendezvous::RendezvousLimits limits;
  limits.max_message_length = 100;
  v1::WorkerExited proto;
  proto.set_local_rank(2);
  proto.set_hang(true);
  proto.set_exit_code(-1);  // what agents send for a hang
  proto.set_pid(4242);
  proto.set_error_message(std::string(500, 'e'));
  proto.set_time_unix_ms(1700000000000);
  rendezvous::WorkerExit exit = *WorkerExitFromProto(proto, limits);
  EXPECT_FALSE(rendezvous::ExitedCleanly(exit));
  EXPECT_TRUE(exit.hang());
  EXPECT_EQ(exit.exit_code(), 0);
  EXPECT_EQ(exit.signal(), 0);
  EXPECT_EQ(exit.pid(), 4242);
  EXPECT_EQ(exit.local_rank(), 2);
  EXPECT_EQ(exit.message().size(), 100u);
  EXPECT_EQ(exit.time_unix_ms(), 1700000000000);
}

TEST(WorkerExitFromProto, HangWithoutMessage_MessageSaysHang) {
  v1::WorkerExited proto;
  proto.set_hang(true);
  rendezvous::WorkerExit exit = *WorkerExitFromProto(proto, {});
  EXPECT_FALSE(rendezvous::ExitedCleanly(exit));
  EXPECT_THAT(exit.message(), HasSubstr("heartbeat"));
}

// A message cut at the limit never ends inside a UTF-8 sequence: the record
// is a proto3 string (an invalid one would not parse back from storage).
TEST(WorkerExitFromProto, MessageOverTheLimit_CutBetweenCharacters) {
  rendezvous::RendezvousLimits limits;
  limits.max_message_length = 4;
  v1::WorkerExited proto;
  proto.set_exit_code(1);
  proto.set_error_message("ab\u20ac!");  // a, b, then 3 bytes of the euro sign
  rendezvous::WorkerExit exit = *WorkerExitFromProto(proto, limits);
  EXPECT_EQ(exit.message(), "ab");
}

// The job's failure is the API's message: a JobFinished carries it as kept.
TEST(OutboundToProto, JobFinished_RootCauseCarriedAsKept) {
  rendezvous::FailureInfo f;
  f.set_node_id("node-a");
  f.set_generation(3);
  f.set_local_rank(1);
  f.set_global_rank(5);
  f.set_hang(true);
  f.set_pid(31337);
  f.set_message("hang: no heartbeat for 5.0 s");
  f.set_time_unix_ms(1700000000123);
  rendezvous::JobFinished finished;
  finished.state = rendezvous::JobState::kFailed;
  finished.root_cause = f;
  v1::CoordinatorMessage m;
  OutboundToProto(finished, &m);
  EXPECT_TRUE(m.job_finished().root_cause().hang());
  EXPECT_EQ(m.job_finished().root_cause().pid(), 31337);
  EXPECT_EQ(m.job_finished().root_cause().time_unix_ms(), 1700000000123);
}

TEST(ActivityFromProto, CpuBusyKept_OutOfRangeInvalidArgument) {
  rendezvous::RendezvousLimits limits;
  const absl::Time now = absl::FromUnixSeconds(1000);
  v1::Heartbeat heartbeat;
  v1::WorkerState* w = heartbeat.add_workers();
  w->set_local_rank(0);
  w->set_state(v1::WORKER_RUNNING);
  w->set_cpu_busy_permille(450);
  auto activity = ActivityFromProto(heartbeat, limits, now);
  ASSERT_TRUE(activity.ok()) << activity.status();
  ASSERT_EQ(activity->size(), 1u);
  EXPECT_EQ((*activity)[0].cpu_busy_permille, 450);
  w->set_cpu_busy_permille(-1);
  EXPECT_THAT(ActivityFromProto(heartbeat, limits, now).status().message(),
              HasSubstr("cpu_busy_permille -1; it must be in [0, 1024000]"));
  w->set_cpu_busy_permille(rendezvous::kMaxCpuBusyPermille + 1);
  EXPECT_EQ(ActivityFromProto(heartbeat, limits, now).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ProgressFromProto, ReportsKeptOthersSkipped_BadValuesInvalidArgument) {
  rendezvous::RendezvousLimits limits;
  const absl::Time now = absl::FromUnixSeconds(1000);
  v1::Heartbeat heartbeat;
  heartbeat.add_workers()->set_local_rank(0);  // no report
  v1::WorkerState* w = heartbeat.add_workers();
  w->set_local_rank(1);
  w->mutable_progress()->set_step(7);
  w->mutable_progress()->set_age_ms(500);
  (*w->mutable_progress()->mutable_metrics())["loss"] = 1.5;
  auto progress = ProgressFromProto(heartbeat, limits, now);
  ASSERT_TRUE(progress.ok()) << progress.status();
  ASSERT_EQ(progress->size(), 1u);
  EXPECT_EQ((*progress)[0].local_rank, 1);
  EXPECT_EQ((*progress)[0].reported, now - absl::Milliseconds(500));
  EXPECT_FALSE((*progress)[0].checkpoint.has_value());

  w->mutable_progress()->set_checkpoint_unix_ms(990'000);
  w->mutable_progress()->set_checkpoint_step(6);
  progress = ProgressFromProto(heartbeat, limits, now);
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ((*progress)[0].checkpoint, absl::FromUnixSeconds(990));
  EXPECT_EQ((*progress)[0].checkpoint_step, 6);
  w->mutable_progress()->set_checkpoint_step(-2);
  EXPECT_THAT(ProgressFromProto(heartbeat, limits, now).status().message(),
              HasSubstr("checkpoint time 990000 ms and step -2"));
  w->mutable_progress()->set_checkpoint_step(6);

  w->mutable_progress()->set_step(-1);
  EXPECT_THAT(ProgressFromProto(heartbeat, limits, now).status().message(), HasSubstr("step -1"));
  w->mutable_progress()->set_step(1);
  for (int i = 0; i < kMaxProgressMetrics; ++i) {
    (*w->mutable_progress()->mutable_metrics())["m" + std::to_string(i)] = i;
  }
  EXPECT_THAT(ProgressFromProto(heartbeat, limits, now).status().message(),
              HasSubstr("the limit is 16"));
  w->mutable_progress()->clear_metrics();
  (*w->mutable_progress()->mutable_metrics())[std::string(65, 'x')] = 1;
  EXPECT_EQ(ProgressFromProto(heartbeat, limits, now).status().code(),
            absl::StatusCode::kInvalidArgument);
  w->mutable_progress()->clear_metrics();
  w->set_local_rank(limits.max_nproc_per_node);
  EXPECT_THAT(ProgressFromProto(heartbeat, limits, now).status().message(),
              HasSubstr("local rank 1024"));
}

TEST(OutboundToProto, EveryBodyKind_MapsToItsField) {
  v1::CoordinatorMessage m;
  rendezvous::Assignment a;
  a.generation = 2;
  a.group_rank = 1;
  a.nccl_unique_id = std::string(128, 'z');
  OutboundToProto(a, &m);
  ASSERT_TRUE(m.has_assignment());
  EXPECT_EQ(m.assignment().group_rank(), 1);
  EXPECT_EQ(m.assignment().nccl_unique_id().size(), 128u);
  OutboundToProto(rendezvous::StopWorkers{4, "restart"}, &m);
  ASSERT_TRUE(m.has_stop_workers());
  EXPECT_EQ(m.stop_workers().generation(), 4);
  rendezvous::JobFinished finished;
  finished.state = rendezvous::JobState::kFailed;
  OutboundToProto(finished, &m);
  EXPECT_EQ(m.job_finished().state(), v1::FAILED);
  EXPECT_FALSE(m.job_finished().has_root_cause());
  OutboundToProto(rendezvous::NodeDismissed{"bye"}, &m);
  EXPECT_EQ(m.node_dismissed().reason(), "bye");
  OutboundToProto(rendezvous::RequestMasterInfo{5}, &m);
  EXPECT_EQ(m.request_master_info().generation(), 5);
}

}  // namespace
}  // namespace ddp::session
