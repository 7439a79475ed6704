#include "coordinator/storage/job_record_codec.h"

#include "absl/strings/str_cat.h"
#include "ddp/state/v1/records.pb.h"
#include "gtest/gtest.h"

namespace ddp::storage {
namespace {

using rendezvous::FailureInfo;
using rendezvous::JobCounters;
using rendezvous::JobRecord;
using rendezvous::JobSettings;
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

// A record with every field set (the counters too).
JobRecord FullRecord() {
  JobRecord r;
  r.set_job_id(std::string("job\0\xfe", 5));
  JobSettings& s = *r.mutable_settings();
  s.set_min_nodes(2);
  s.set_max_nodes(7);
  s.set_nproc_per_node(8);
  s.set_max_restarts(5);
  s.set_join_timeout_ms(61000);
  s.set_last_call_timeout_ms(1500);
  s.set_heartbeat_interval_ms(250);
  s.set_heartbeat_timeout_ms(15000);
  s.set_shutdown_timeout_ms(9000);
  s.set_hang_timeout_ms(20000);
  rendezvous::SetJobState(JobState::kRestarting, &r);
  r.set_generation(12);
  r.set_restart_count(2);
  *r.mutable_cause() = Failure("n1", 0);
  r.set_finish_message("done");
  *r.add_failure_history() = Failure("n1", 0);
  *r.add_failure_history() = Failure("n2", 3);
  r.add_excluded_nodes("n9");
  r.add_excluded_nodes("n3");
  *r.mutable_master() = rendezvous::NewMasterInfo("10.0.0.1", 29500, std::string(128, '\x01'));
  r.set_world_size(64);
  rendezvous::SetCreated(absl::FromUnixNanos(1'700'000'000'000'000'001), &r);
  r.set_run(3);
  rendezvous::SetFinished(absl::FromUnixMillis(1'700'000'100'000), &r);
  r.set_token_hash("abc123");
  rendezvous::SetCounters(JobCounters{5, 6}, &r);
  return r;
}

TEST(JobRecordCodecTest, JobRecordRoundTripsEveryField_CountersFromBesideIt) {
  const JobRecord r = FullRecord();
  absl::StatusOr<JobRecord> back = DecodeJobRecord(EncodeJobRecord(r), JobCounters{77, 99});
  ASSERT_TRUE(back.ok()) << back.status();
  JobRecord want = r;
  rendezvous::SetCounters(JobCounters{77, 99}, &want);  // the columns', not the record's
  EXPECT_EQ(back->ShortDebugString(), want.ShortDebugString());
  EXPECT_EQ(rendezvous::CreatedAt(*back), absl::FromUnixNanos(1'700'000'000'000'000'001));
  EXPECT_EQ(rendezvous::JobStateOf(*back), JobState::kRestarting);
  EXPECT_EQ(back->master().nccl_unique_id(), std::string(128, '\x01'));
}

// The stored bytes are those of earlier releases: the record without its
// counters (they live beside it), so either release reads what the other
// wrote.
TEST(JobRecordCodecTest, StoredBytes_AreTheRecordWithoutItsCounters) {
  JobRecord r = FullRecord();
  ddp::state::v1::JobRecord stored;
  ASSERT_TRUE(stored.ParseFromString(EncodeJobRecord(r)));
  EXPECT_EQ(stored.last_event_index(), 0);
  EXPECT_EQ(stored.next_join_seq(), 0u);
  r.clear_last_event_index();
  r.clear_next_join_seq();
  EXPECT_EQ(EncodeJobRecord(FullRecord()), r.SerializeAsString());
}

TEST(JobRecordCodecTest, NewRecord_UnknownTimesAndNoRootCauseStayUnknown) {
  const JobRecord r = rendezvous::NewJobRecord("j", rendezvous::DefaultJobSettings(), absl::Time());
  EXPECT_EQ(r.run(), 1);
  EXPECT_EQ(rendezvous::CountersOf(r).next_join_seq, 1u);
  EXPECT_EQ(rendezvous::JobStateOf(r), JobState::kWaiting);
  absl::StatusOr<JobRecord> back = DecodeJobRecord(EncodeJobRecord(r), rendezvous::CountersOf(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ShortDebugString(), r.ShortDebugString());
  EXPECT_FALSE(back->has_cause());
  EXPECT_EQ(rendezvous::CreatedAt(*back), absl::Time());
  EXPECT_EQ(rendezvous::FinishedAt(*back), absl::Time());
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
  EXPECT_TRUE(back->settings().has_hang_timeout_ms());
  EXPECT_EQ(back->settings().hang_timeout_ms(), 10000);
  EXPECT_EQ(back->settings().min_nodes(), 2);
  EXPECT_EQ(back->settings().heartbeat_timeout_ms(), 3000);
  // A hang timeout turned off (0) stays off.
  old.mutable_settings()->set_hang_timeout_ms(0);
  back = DecodeJobRecord(old.SerializeAsString(), JobCounters{});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->settings().has_hang_timeout_ms());
  EXPECT_EQ(back->settings().hang_timeout_ms(), 0);
}

TEST(JobRecordCodecTest, StoredJobCarriesItsCounters) {
  const JobRecord r = FullRecord();
  const std::string bytes = EncodeStoredJob(r, JobCounters{12, 34});
  absl::StatusOr<JobRecord> back = DecodeStoredJob(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  JobRecord want = r;
  rendezvous::SetCounters(JobCounters{12, 34}, &want);  // the given counters win
  EXPECT_EQ(back->ShortDebugString(), want.ShortDebugString());
  // As earlier releases stored it: the counters beside the record only.
  ddp::state::v1::StoredJobRecord stored;
  ASSERT_TRUE(stored.ParseFromString(bytes));
  EXPECT_EQ(stored.last_event_index(), 12);
  EXPECT_EQ(stored.next_join_seq(), 34u);
  EXPECT_EQ(stored.record().last_event_index(), 0);
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
  ASSERT_TRUE(back->has_cause());
  EXPECT_EQ(back->cause().node_id(), "n1");
  EXPECT_EQ(back->cause().global_rank(), 6);
  EXPECT_EQ(back->cause().exit_code(), 3);
  EXPECT_EQ(back->cause().time_unix_ms(), 1'700'000'000'123);
  EXPECT_EQ(back->cause().message(), "cut \xef\xbf\xbd\xef\xbf\xbd");
  ASSERT_EQ(back->failure_history_size(), 1);
  EXPECT_EQ(back->failure_history(0).message(), back->cause().message());
  // Upgraded: the core's record holds no legacy field.
  EXPECT_FALSE(back->has_root_cause());
  EXPECT_EQ(back->failures_size(), 0);
  // Written again, it is the new form: it parses as a proto3 record.
  absl::StatusOr<JobRecord> again = DecodeJobRecord(EncodeJobRecord(*back), JobCounters{});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ShortDebugString(), back->ShortDebugString());
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
