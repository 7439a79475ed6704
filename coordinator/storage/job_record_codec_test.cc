#include "coordinator/storage/job_record_codec.h"

#include "absl/strings/str_cat.h"
#include "ddp/state/v1/records.pb.h"
#include "gtest/gtest.h"

namespace ddp::storage {
namespace {

using rendezvous::FailureInfo;
using rendezvous::JobCounters;
using rendezvous::JobRecord;
using rendezvous::JobState;
using rendezvous::NodeRecord;

FailureInfo Failure(const std::string& node, int rank) {
  FailureInfo f;
  f.set_node_id(node);
  f.set_generation(3);
  f.set_local_rank(rank);
  f.set_global_rank(10 + rank);
  f.set_exit_code(1);
  f.set_signal(9);
  f.set_message(std::string("boom\0\xc3\xa9", 7));
  f.set_time_unix_ms(1'700'000'000'123);
  f.set_hang(true);
  f.set_pid(4242);
  return f;
}

TEST(JobRecordCodecTest, JobRecordRoundTripsEveryField) {
  JobRecord r;
  r.job_id = std::string("job\0\xfe", 5);
  r.settings.set_min_nodes(2);
  r.settings.set_max_nodes(7);
  r.settings.set_nproc_per_node(8);
  r.settings.set_max_restarts(5);
  r.settings.set_join_timeout_ms(61000);
  r.settings.set_last_call_timeout_ms(1500);
  r.settings.set_heartbeat_interval_ms(250);
  r.settings.set_heartbeat_timeout_ms(15000);
  r.settings.set_shutdown_timeout_ms(9000);
  r.state = JobState::kRestarting;
  r.generation = 12;
  r.restart_count = 2;
  r.root_cause = Failure("n1", 0);
  r.finish_message = "done";
  r.failures = {Failure("n1", 0), Failure("n2", 3)};
  r.excluded_nodes = {"n9", "n3"};
  r.master = {"10.0.0.1", 29500, std::string(128, '\x01')};
  r.world_size = 64;
  r.created = absl::FromUnixMillis(1'700'000'000'000);
  r.run = 3;
  r.finished = absl::FromUnixMillis(1'700'000'100'000);
  r.token_hash = "abc123";

  absl::StatusOr<JobRecord> back = DecodeJobRecord(EncodeJobRecord(r), JobCounters{77, 99});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->job_id, r.job_id);
  EXPECT_EQ(back->settings.DebugString(), r.settings.DebugString());
  EXPECT_EQ(back->state, r.state);
  EXPECT_EQ(back->generation, 12);
  EXPECT_EQ(back->restart_count, 2);
  ASSERT_TRUE(back->root_cause.has_value());
  EXPECT_EQ(back->root_cause->message(), r.root_cause->message());
  EXPECT_EQ(back->root_cause->time_unix_ms(), 1'700'000'000'123);
  EXPECT_TRUE(back->root_cause->hang());
  EXPECT_EQ(back->root_cause->pid(), 4242);
  EXPECT_EQ(back->finish_message, "done");
  ASSERT_EQ(back->failures.size(), 2u);
  EXPECT_EQ(back->failures[1].node_id(), "n2");
  EXPECT_EQ(back->failures[1].global_rank(), 13);
  EXPECT_EQ(back->excluded_nodes, r.excluded_nodes);
  EXPECT_EQ(back->master.master_addr, "10.0.0.1");
  EXPECT_EQ(back->master.master_port, 29500);
  EXPECT_EQ(back->master.nccl_unique_id, r.master.nccl_unique_id);
  EXPECT_EQ(back->world_size, 64);
  EXPECT_EQ(back->last_event_index, 77);  // from the counters, not the record
  EXPECT_EQ(back->next_join_seq, 99u);
  EXPECT_EQ(back->created, r.created);
  EXPECT_EQ(back->run, 3);
  EXPECT_EQ(back->finished, r.finished);
  EXPECT_EQ(back->token_hash, "abc123");
}

TEST(JobRecordCodecTest, UnknownTimesAndNoRootCauseStayUnknown) {
  JobRecord r;
  r.job_id = "j";
  absl::StatusOr<JobRecord> back = DecodeJobRecord(EncodeJobRecord(r), JobCounters{});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->root_cause.has_value());
  EXPECT_EQ(back->created, absl::Time());
  EXPECT_EQ(back->finished, absl::Time());
  EXPECT_EQ(back->run, 1);
}

TEST(JobRecordCodecTest, RefusesWhatIsNotARecord) {
  absl::StatusOr<JobRecord> garbage = DecodeJobRecord("\xff\xff\xff", JobCounters{});
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kDataLoss);

  ddp::state::v1::JobRecord bad_state;
  bad_state.set_state(42);
  absl::StatusOr<JobRecord> state = DecodeJobRecord(bad_state.SerializeAsString(), JobCounters{});
  EXPECT_EQ(state.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(state.status().message().find("42"), std::string::npos);

  ddp::state::v1::JobRecord bad_timeout;
  bad_timeout.mutable_settings()->set_heartbeat_timeout_ms(-5);
  absl::StatusOr<JobRecord> timeout =
      DecodeJobRecord(bad_timeout.SerializeAsString(), JobCounters{});
  EXPECT_EQ(timeout.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(timeout.status().message().find("heartbeat_timeout_ms"), std::string::npos);

  EXPECT_EQ(DecodeNodeRecord("\xff\xff").status().code(), absl::StatusCode::kDataLoss);
}

TEST(JobRecordCodecTest, StoredBeforeTheHangTimeout_ReadWithTheDefaultWrittenOut) {
  ddp::state::v1::JobRecord old;
  old.mutable_settings()->set_min_nodes(2);
  old.mutable_settings()->set_heartbeat_timeout_ms(3000);
  absl::StatusOr<JobRecord> back = DecodeJobRecord(old.SerializeAsString(), JobCounters{});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->settings.has_hang_timeout_ms());
  EXPECT_EQ(back->settings.hang_timeout_ms(), 10000);
  EXPECT_EQ(back->settings.min_nodes(), 2);
  EXPECT_EQ(back->settings.heartbeat_timeout_ms(), 3000);
  // A hang timeout turned off (0) stays off.
  old.mutable_settings()->set_hang_timeout_ms(0);
  back = DecodeJobRecord(old.SerializeAsString(), JobCounters{});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->settings.has_hang_timeout_ms());
  EXPECT_EQ(back->settings.hang_timeout_ms(), 0);
}

TEST(JobRecordCodecTest, StoredJobCarriesItsCounters) {
  JobRecord r;
  r.job_id = "j";
  r.generation = 4;
  absl::StatusOr<JobRecord> back = DecodeStoredJob(EncodeStoredJob(r, JobCounters{12, 34}));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->generation, 4);
  EXPECT_EQ(back->last_event_index, 12);
  EXPECT_EQ(back->next_join_seq, 34u);
  EXPECT_EQ(DecodeStoredJob("\xff\xff").status().code(), absl::StatusCode::kDataLoss);
}

TEST(JobRecordCodecTest, NodeRecordRoundTrips) {
  NodeRecord n = rendezvous::NewNodeRecord("");
  n.set_node_id("node-7");
  n.set_incarnation(~0ull);
  n.set_nproc(8);
  n.set_requested_rank(3);
  n.set_address("10.1.2.3");
  n.set_group_rank(2);
  n.set_global_rank_offset(16);
  n.set_join_seq(1ull << 63);
  absl::StatusOr<NodeRecord> back = DecodeNodeRecord(EncodeNodeRecord(n));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->node_id(), n.node_id());
  EXPECT_EQ(back->incarnation(), n.incarnation());
  EXPECT_EQ(back->nproc(), 8);
  EXPECT_EQ(back->requested_rank(), 3);
  EXPECT_EQ(back->address(), n.address());
  EXPECT_EQ(back->group_rank(), 2);
  EXPECT_EQ(back->global_rank_offset(), 16);
  EXPECT_EQ(back->join_seq(), n.join_seq());
}

TEST(JobRecordCodecTest, NodeRecordDrain_KeptToTheMillisecondReasonOnlyWithATime) {
  NodeRecord n = rendezvous::NewNodeRecord("node-1");
  EXPECT_FALSE(rendezvous::DrainLeavesAt(n).has_value());
  const absl::Time leaves_at = absl::FromUnixMicros(1'700'000'000'123'456);
  rendezvous::SetDrain(leaves_at, "maintenance", &n);
  absl::StatusOr<NodeRecord> back = DecodeNodeRecord(EncodeNodeRecord(n));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(rendezvous::DrainLeavesAt(*back), absl::FromUnixMillis(1'700'000'000'123));
  EXPECT_EQ(back->drain_reason(), "maintenance");
  // A reason without a time is no drain.
  n.set_drain_leaves_at_unix_ms(0);
  back = DecodeNodeRecord(EncodeNodeRecord(n));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(rendezvous::DrainLeavesAt(*back).has_value());
  EXPECT_EQ(back->drain_reason(), "");
  // A time at the epoch still drains (stored as 1 ms: 0 means none).
  rendezvous::SetDrain(absl::UnixEpoch(), "now", &n);
  EXPECT_TRUE(rendezvous::DrainLeavesAt(n).has_value());
}

TEST(JobRecordCodecTest, JobEventRoundTripsEveryFieldWithoutItsJobId) {
  rendezvous::JobEvent e;
  e.set_job_id("dropped: the key holds it");
  e.set_index(5'000'000'000);
  e.set_time_unix_ms(1'700'000'000'987);
  e.set_type(rendezvous::JobEvent::RESTARTING);
  e.set_node_id(std::string("n\0de", 4));
  e.set_generation(7);
  e.set_message("why \xe2\x82\xac");
  *e.mutable_failure() = Failure("node-b", 1);
  e.mutable_failure()->set_process_stopped(true);
  e.set_restart_cause(rendezvous::RestartCause::HANG);
  e.set_last_checkpoint_unix_ms(1'700'000'000'123);
  e.set_last_checkpoint_step(1200);
  const std::string bytes = EncodeJobEvent(e);
  EXPECT_EQ(bytes.find("dropped"), std::string::npos);
  absl::StatusOr<rendezvous::JobEvent> back = DecodeJobEvent(bytes, "j");
  ASSERT_TRUE(back.ok()) << back.status();
  rendezvous::JobEvent want = e;
  want.set_job_id("j");
  EXPECT_EQ(back->ShortDebugString(), want.ShortDebugString());

  e.clear_failure();
  e.clear_last_checkpoint_unix_ms();
  back = DecodeJobEvent(EncodeJobEvent(e), "j");
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->has_failure());
  EXPECT_EQ(back->last_checkpoint_unix_ms(), 0);
  EXPECT_EQ(back->last_checkpoint_step(), 0);  // stored only with a checkpoint
}

// The stored event keeps the bytes of the releases before 2026-11-27 (type
// numbered from 0, nanoseconds, strings as bytes), so that either release
// reads what the other wrote: the numbers of every type, both ways.
TEST(JobRecordCodecTest, JobEventRecord_KeepsTheStoredNumbersOfEarlierReleases) {
  const std::pair<int, rendezvous::JobEventType> stored_types[] = {
      {0, rendezvous::JobEvent::JOB_CREATED},   {1, rendezvous::JobEvent::NODE_JOINED},
      {2, rendezvous::JobEvent::NODE_LOST},     {3, rendezvous::JobEvent::GENERATION_OPENED},
      {4, rendezvous::JobEvent::WORKER_FAILED}, {5, rendezvous::JobEvent::RESTARTING},
      {6, rendezvous::JobEvent::JOB_FINISHED},  {7, rendezvous::JobEvent::JOB_UPDATED},
      {8, rendezvous::JobEvent::NODE_DRAINING}};
  for (const auto& [number, type] : stored_types) {
    SCOPED_TRACE(number);
    ddp::state::v1::JobEventRecord old;
    old.set_index(3);
    old.set_time_unix_ns(1'700'000'000'123'456'789);
    old.set_type(number);
    old.set_node_id(std::string("n\xe2\x82", 3));  // cut inside a euro sign
    old.set_generation(2);
    old.set_message("m");
    old.set_restart_cause(type == rendezvous::JobEvent::RESTARTING ? 6 : 0);  // DRAIN
    absl::StatusOr<rendezvous::JobEvent> back = DecodeJobEvent(old.SerializeAsString(), "j");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->type(), type);
    EXPECT_EQ(back->time_unix_ms(), 1'700'000'000'123);
    EXPECT_EQ(back->node_id(), "n\xef\xbf\xbd\xef\xbf\xbd");
    EXPECT_EQ(back->restart_cause(), type == rendezvous::JobEvent::RESTARTING
                                         ? rendezvous::RestartCause::DRAIN
                                         : rendezvous::RestartCause::RESTART_CAUSE_UNSPECIFIED);
    ddp::state::v1::JobEventRecord again;
    ASSERT_TRUE(again.ParseFromString(EncodeJobEvent(*back)));
    EXPECT_EQ(again.type(), number);
    EXPECT_EQ(again.time_unix_ns(), 1'700'000'000'123'000'000);  // milliseconds kept
    EXPECT_EQ(again.restart_cause(), old.restart_cause());
    EXPECT_EQ(StoredEventType(type), number);
  }
}

// An event written by a release before 2026-11-27 kept its failure as a
// FailureRecord: read as the API's Failure.
TEST(JobRecordCodecTest, LegacyEventFailure_ReadAsFailure) {
  ddp::state::v1::JobEventRecord old;
  old.set_index(4);
  old.set_type(4);  // WORKER_FAILED
  ddp::state::v1::FailureRecord* failure = old.mutable_failure();
  failure->set_node_id("n1");
  failure->set_local_rank(1);
  failure->set_exit_code(9);
  failure->set_time_unix_ns(1'700'000'000'555'000'001);
  absl::StatusOr<rendezvous::JobEvent> back = DecodeJobEvent(old.SerializeAsString(), "j");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->has_failure());
  EXPECT_EQ(back->failure().node_id(), "n1");
  EXPECT_EQ(back->failure().exit_code(), 9);
  EXPECT_EQ(back->failure().time_unix_ms(), 1'700'000'000'555);
}

// A record of a release before 2026-11-27 kept its failures as FailureRecord
// (nanoseconds, bytes cut anywhere): read as the API's Failure, times in
// milliseconds, bytes that are no UTF-8 replaced.
TEST(JobRecordCodecTest, LegacyFailureRecords_ReadAsFailures) {
  ddp::state::v1::JobRecord old;
  old.set_job_id("j");
  old.set_state(static_cast<int32_t>(JobState::kFailed));
  ddp::state::v1::FailureRecord* cause = old.mutable_root_cause();
  cause->set_node_id("n1");
  cause->set_local_rank(2);
  cause->set_global_rank(6);
  cause->set_exit_code(3);
  cause->set_message(std::string("cut \xe2\x82", 6));  // a euro sign cut in two
  cause->set_time_unix_ns(1'700'000'000'123'456'789);
  *old.add_failures() = *cause;
  absl::StatusOr<JobRecord> back = DecodeJobRecord(old.SerializeAsString(), JobCounters{});
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->root_cause.has_value());
  EXPECT_EQ(back->root_cause->node_id(), "n1");
  EXPECT_EQ(back->root_cause->global_rank(), 6);
  EXPECT_EQ(back->root_cause->exit_code(), 3);
  EXPECT_EQ(back->root_cause->time_unix_ms(), 1'700'000'000'123);
  EXPECT_EQ(back->root_cause->message(), "cut \xef\xbf\xbd\xef\xbf\xbd");
  ASSERT_EQ(back->failures.size(), 1u);
  EXPECT_EQ(back->failures[0].message(), back->root_cause->message());
  // Written again, it is the new form: it parses as a proto3 record.
  absl::StatusOr<JobRecord> again = DecodeJobRecord(EncodeJobRecord(*back), JobCounters{});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->failures.size(), 1u);
}

TEST(JobRecordCodecTest, JobEventOfUnknownTypeOrCause_DataLossNamingIt) {
  for (int number : {99, -1, 1000}) {
    ddp::state::v1::JobEventRecord type;
    type.set_type(number);
    absl::StatusOr<rendezvous::JobEvent> bad = DecodeJobEvent(type.SerializeAsString(), "j");
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss) << number;
    EXPECT_NE(bad.status().message().find(absl::StrCat("type ", number)), std::string::npos)
        << bad.status();
  }
  ddp::state::v1::JobEventRecord cause;
  cause.set_restart_cause(-1);
  absl::StatusOr<rendezvous::JobEvent> bad = DecodeJobEvent(cause.SerializeAsString(), "j");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("restart cause -1"), std::string::npos) << bad.status();
  EXPECT_EQ(DecodeJobEvent("\xff\xff", "j").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(EventKeyFromStored(int64_t{1} << 40, 0).status().code(), absl::StatusCode::kDataLoss);
}

TEST(JobRecordCodecTest, EventCountsRoundTrip) {
  rendezvous::JobEventCounts counts;
  counts.Add(rendezvous::JobEvent::RESTARTING, rendezvous::RestartCause::SCALE, 3);
  counts.Add(rendezvous::JobEvent::WORKER_FAILED,
             rendezvous::RestartCause::RESTART_CAUSE_UNSPECIFIED, 1'000'000'000'000);
  absl::StatusOr<rendezvous::JobEventCounts> back = DecodeEventCounts(EncodeEventCounts(counts));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->counts, counts.counts);
  EXPECT_EQ(DecodeEventCounts("\xff\xff").status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ddp::storage
