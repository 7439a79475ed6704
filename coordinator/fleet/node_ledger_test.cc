#include "coordinator/fleet/node_ledger.h"

#include <string>
#include <vector>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::fleet {
namespace {

using ::testing::HasSubstr;

v1::HealthCheckResult Check(const std::string& name, bool passed, const std::string& output = "") {
  v1::HealthCheckResult check;
  check.set_name(name);
  check.set_passed(passed);
  check.set_output(output);
  return check;
}

class NodeLedgerTest : public ::testing::Test {
 protected:
  NodeLedgerTest() : ledger_(clock_, Options()) {}

  NodeLedgerOptions Options() {
    NodeLedgerOptions options;
    options.quarantine = {2, absl::Hours(1)};
    options.max_incidents_per_node = 4;
    options.max_nodes = 3;
    options.on_change = [this] { ++changes_; };
    return options;
  }

  rendezvous::JobEvent WorkerFailed(const std::string& job, const std::string& node,
                                    int64_t generation, absl::Duration ago, bool hang = false) {
    rendezvous::JobEvent event;
    event.set_job_id(job);
    event.set_type(rendezvous::JobEvent::WORKER_FAILED);
    event.set_node_id(node);
    rendezvous::SetEventTime(clock_.Now(), &event);
    rendezvous::FailureInfo failure;
    failure.set_node_id(node);
    failure.set_generation(generation);
    failure.set_local_rank(0);
    failure.set_global_rank(1);
    failure.set_exit_code(3);
    failure.set_hang(hang);
    rendezvous::SetFailureTime(clock_.Now() - ago, &failure);
    *event.mutable_failure() = failure;
    return event;
  }

  // `loss` unspecified: the node left (or was excluded, drained).
  rendezvous::JobEvent NodeLost(
      const std::string& job, const std::string& node, const std::string& reason,
      rendezvous::FailureInfo::NodeLoss loss = rendezvous::FailureInfo::NODE_LOSS_UNSPECIFIED) {
    rendezvous::JobEvent event;
    event.set_job_id(job);
    event.set_type(rendezvous::JobEvent::NODE_LOST);
    event.set_node_id(node);
    rendezvous::SetEventTime(clock_.Now(), &event);
    event.set_message(reason);
    if (loss != rendezvous::FailureInfo::NODE_LOSS_UNSPECIFIED) {
      *event.mutable_failure() = rendezvous::NodeFailure(node, 1, clock_.Now(), reason);
      event.mutable_failure()->set_node_loss(loss);
    }
    return event;
  }

  FakeClock clock_;
  int changes_ = 0;
  NodeLedger ledger_;
};

TEST_F(NodeLedgerTest, Admit_NewNode_RecordedReadyWithAddressAndJob) {
  ASSERT_TRUE(ledger_.Admit("n1", "10.0.0.1", "j", {}, false).ok());
  absl::StatusOr<v1::Node> node = ledger_.Get("n1");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->state(), v1::NODE_READY);
  EXPECT_EQ(node->address(), "10.0.0.1");
  EXPECT_EQ(node->last_job_id(), "j");
  EXPECT_EQ(changes_, 1);
  EXPECT_EQ(ledger_.TakeDirty().size(), 1u);
  EXPECT_TRUE(ledger_.TakeDirty().empty());
}

TEST_F(NodeLedgerTest, Admit_FailedCheck_RefusedWithNameAndOutputStored) {
  absl::Status status = ledger_.Admit(
      "n1", "a", "j", {Check("gpus", true), Check("disk", false, "only 1 GiB\nmore")}, false);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("'disk' failed: only 1 GiB"));
  v1::Node node = *ledger_.Get("n1");
  ASSERT_EQ(node.checks_size(), 2);
  EXPECT_EQ(node.checks(1).output(), "only 1 GiB\nmore");
  ASSERT_EQ(node.incidents_size(), 1);
  EXPECT_EQ(node.incidents(0).kind(), v1::NODE_INCIDENT_CHECK_FAILED);
  // The next check passes: it replaces the result of the same name and joins.
  EXPECT_TRUE(ledger_.Admit("n1", "a", "j", {Check("disk", true)}, false).ok());
  EXPECT_TRUE(ledger_.Get("n1")->checks(1).passed());
}

TEST_F(NodeLedgerTest, ReportChecks_FailedBetweenGenerations_CountedIncidentWithGeneration) {
  ASSERT_TRUE(ledger_.Admit("n1", "a", "j", {Check("ecc", true)}, false).ok());
  ASSERT_TRUE(
      ledger_
          .ReportChecks("n1", "j", 3, {Check("ecc", false, "ECC errors: 2\n"), Check("disk", true)})
          .ok());
  v1::Node node = *ledger_.Get("n1");
  ASSERT_EQ(node.checks_size(), 2);
  EXPECT_FALSE(node.checks(0).passed());
  EXPECT_EQ(node.checks(0).output(), "ECC errors: 2\n");
  ASSERT_EQ(node.incidents_size(), 1);
  EXPECT_EQ(node.incidents(0).kind(), v1::NODE_INCIDENT_CHECK_FAILED);
  EXPECT_EQ(node.incidents(0).job_id(), "j");
  EXPECT_EQ(node.incidents(0).generation(), 3);
  EXPECT_TRUE(node.incidents(0).counted());
  EXPECT_THAT(node.incidents(0).cause(), HasSubstr("'ecc' failed: ECC errors: 2"));
  EXPECT_EQ(node.state(), v1::NODE_READY);  // the policy is off here
}

TEST_F(NodeLedgerTest, ReportChecks_BadInput_InvalidArgumentNothingStored) {
  EXPECT_EQ(ledger_.ReportChecks("n1", "j", 1, {Check("", false)}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger_.ReportChecks("", "j", 1, {Check("c", false)}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger_.Get("n1").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(NodeLedgerTest, Admit_BadCheckInput_InvalidArgumentNamingTheLimit) {
  EXPECT_EQ(ledger_.Admit("n1", "a", "j", {Check("", true)}, false).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<v1::HealthCheckResult> many(17, Check("c", true));
  absl::Status status = ledger_.Admit("n1", "a", "j", many, false);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("at most 16"));
  EXPECT_EQ(ledger_.Admit(std::string(300, 'x'), "a", "j", {}, false).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(NodeLedgerTest, Admit_LongOutput_KeepsItsTail) {
  std::string output = "head" + std::string(5000, '.') + "tail";
  EXPECT_FALSE(ledger_.Admit("n1", "a", "j", {Check("c", false, output)}, false).ok());
  const std::string stored = ledger_.Get("n1")->checks(0).output();
  EXPECT_EQ(stored.size(), 4096u);
  EXPECT_EQ(stored.substr(stored.size() - 4), "tail");
}

TEST_F(NodeLedgerTest, Admit_OverMaxNodes_ResourceExhausted) {
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(ledger_.Admit(id, "", "j", {}, false).ok());
  EXPECT_EQ(ledger_.Admit("d", "", "j", {}, false).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(ledger_.Admit("a", "", "j", {}, false).ok());
}

TEST_F(NodeLedgerTest, Cordon_RefusesNewJoinsNotResumes_UncordonLetsIn) {
  absl::StatusOr<v1::Node> node = ledger_.Cordon("n1", "bad fan");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->state(), v1::NODE_CORDONED);
  absl::Status status = ledger_.Admit("n1", "a", "j", {}, false);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("cordoned"));
  EXPECT_THAT(status.message(), HasSubstr("bad fan"));
  EXPECT_THAT(status.message(), HasSubstr("ddpctl nodes uncordon n1"));
  EXPECT_TRUE(ledger_.Admit("n1", "a", "j", {}, /*resuming=*/true).ok());
  ASSERT_TRUE(ledger_.Uncordon("n1").ok());
  EXPECT_TRUE(ledger_.Admit("n1", "a", "j", {}, false).ok());
}

TEST_F(NodeLedgerTest, Uncordon_UnknownNode_NotFound) {
  EXPECT_EQ(ledger_.Uncordon("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ledger_.Get("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(NodeLedgerTest, Policy_FailuresInTwoJobs_Quarantined) {
  ledger_.RecordEvents({WorkerFailed("job-a", "n1", 1, absl::ZeroDuration())});
  EXPECT_EQ(ledger_.Get("n1")->state(), v1::NODE_READY);
  clock_.Advance(absl::Minutes(10));
  ledger_.RecordEvents({WorkerFailed("job-b", "n1", 1, absl::ZeroDuration())});
  v1::Node node = *ledger_.Get("n1");
  EXPECT_EQ(node.state(), v1::NODE_QUARANTINED);
  EXPECT_THAT(node.state_reason(), HasSubstr("job 'job-a' rank 1 exit code 3"));
  EXPECT_THAT(node.state_reason(), HasSubstr("job 'job-b'"));
  absl::Status status = ledger_.Admit("n1", "a", "job-c", {}, false);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("quarantined"));
  EXPECT_THAT(status.message(), HasSubstr("job-a"));
}

TEST_F(NodeLedgerTest, Policy_IncidentsOutsideWindow_NotQuarantined) {
  ledger_.RecordEvents({WorkerFailed("job-a", "n1", 1, absl::ZeroDuration())});
  clock_.Advance(absl::Minutes(61));
  ledger_.RecordEvents({WorkerFailed("job-b", "n1", 1, absl::ZeroDuration())});
  EXPECT_EQ(ledger_.Get("n1")->state(), v1::NODE_READY);
}

TEST_F(NodeLedgerTest, Policy_KnockOnFailureOfPeer_NotCounted) {
  // n2's worker failed first; n1's peers failed on the broken collective.
  ledger_.RecordEvents({WorkerFailed("job-a", "n1", 1, absl::Seconds(1)),
                        WorkerFailed("job-a", "n2", 1, absl::Seconds(2))});
  ledger_.RecordEvents({WorkerFailed("job-b", "n1", 1, absl::Seconds(1)),
                        WorkerFailed("job-b", "n2", 1, absl::Seconds(2))});
  EXPECT_EQ(ledger_.Get("n1")->state(), v1::NODE_READY);
  EXPECT_FALSE(ledger_.Get("n1")->incidents(0).counted());
  EXPECT_EQ(ledger_.Get("n2")->state(), v1::NODE_QUARANTINED);
}

TEST_F(NodeLedgerTest, Policy_TwoFailuresOfOneGeneration_CountOnce) {
  ledger_.RecordEvents({WorkerFailed("job-a", "n1", 1, absl::Seconds(2)),
                        WorkerFailed("job-a", "n1", 1, absl::Seconds(1))});
  EXPECT_EQ(ledger_.Get("n1")->state(), v1::NODE_READY);
  EXPECT_EQ(ledger_.Get("n1")->incident_count(), 2);
}

TEST_F(NodeLedgerTest, Policy_LostLeasesCount_LeftNodesDoNot) {
  // The kind decides, not the words: a node that left with a message that
  // reads like a loss is not an incident.
  ledger_.RecordEvents({NodeLost("job-a", "n1", "left the job"),
                        NodeLost("job-a", "n1", "lost: it left on its own")});
  EXPECT_EQ(ledger_.Get("n1").status().code(), absl::StatusCode::kNotFound);
  ledger_.RecordEvents(
      {NodeLost("job-a", "n1", "no heartbeat for 10s", rendezvous::FailureInfo::LEASE_EXPIRED),
       NodeLost("job-b", "n1", "workers not confirmed stopped",
                rendezvous::FailureInfo::DECLARED_DEAD)});
  v1::Node node = *ledger_.Get("n1");
  EXPECT_EQ(node.incidents(0).kind(), v1::NODE_INCIDENT_LEASE_LOST);
  EXPECT_EQ(node.state(), v1::NODE_QUARANTINED);
}

TEST_F(NodeLedgerTest, Uncordon_Quarantined_OldIncidentsNoLongerCount) {
  ledger_.RecordEvents({WorkerFailed("job-a", "n1", 1, absl::ZeroDuration()),
                        WorkerFailed("job-b", "n1", 1, absl::ZeroDuration())});
  ASSERT_EQ(ledger_.Get("n1")->state(), v1::NODE_QUARANTINED);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(ledger_.Uncordon("n1").ok());
  clock_.Advance(absl::Seconds(1));
  ledger_.RecordEvents({WorkerFailed("job-c", "n1", 1, absl::ZeroDuration())});
  EXPECT_EQ(ledger_.Get("n1")->state(), v1::NODE_READY);
  EXPECT_EQ(ledger_.Get("n1")->incident_count(), 3);
}

TEST_F(NodeLedgerTest, Incidents_Bounded_CountKeepsAll) {
  NodeLedgerOptions options = Options();
  options.quarantine.after = 0;
  NodeLedger ledger(clock_, options);
  for (int job = 0; job < 6; ++job) {
    ledger.RecordEvents(
        {WorkerFailed("job-" + std::to_string(job), "n1", 1, absl::ZeroDuration())});
  }
  v1::Node node = *ledger.Get("n1");
  EXPECT_EQ(node.incidents_size(), 4);
  EXPECT_EQ(node.incidents(0).job_id(), "job-2");
  EXPECT_EQ(node.incident_count(), 6);
  EXPECT_EQ(node.state(), v1::NODE_READY);
}

TEST_F(NodeLedgerTest, Restore_KeepsStateAndEarliestFailures) {
  ledger_.RecordEvents({WorkerFailed("job-a", "n2", 1, absl::Seconds(2))});
  ASSERT_TRUE(ledger_.Cordon("n3", "").ok());
  NodeLedger restored(clock_, Options());
  ASSERT_TRUE(restored.Restore(ledger_.List()).ok());
  EXPECT_EQ(restored.Get("n3")->state(), v1::NODE_CORDONED);
  // n1's earlier failure of the same generation takes the count from n2.
  restored.RecordEvents({WorkerFailed("job-a", "n1", 1, absl::Seconds(3))});
  EXPECT_FALSE(restored.Get("n2")->incidents(0).counted());
  EXPECT_TRUE(restored.Get("n1")->incidents(0).counted());
}

TEST_F(NodeLedgerTest, CountByState_EveryState) {
  ASSERT_TRUE(ledger_.Admit("a", "", "j", {}, false).ok());
  ASSERT_TRUE(ledger_.Cordon("b", "").ok());
  std::map<v1::NodeState, int64_t> counts = ledger_.CountByState();
  EXPECT_EQ(counts[v1::NODE_READY], 1);
  EXPECT_EQ(counts[v1::NODE_CORDONED], 1);
  EXPECT_EQ(counts[v1::NODE_QUARANTINED], 0);
}

TEST(QuarantinePolicyTest, Validate_BadValues_NameThem) {
  EXPECT_TRUE(ValidateQuarantinePolicy({0, absl::ZeroDuration()}).ok());
  EXPECT_TRUE(ValidateQuarantinePolicy({3, absl::Hours(1)}).ok());
  absl::Status negative = ValidateQuarantinePolicy({-1, absl::Hours(1)});
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.message(), HasSubstr("-1"));
  absl::Status window = ValidateQuarantinePolicy({2, absl::Milliseconds(10)});
  EXPECT_EQ(window.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(window.message(), HasSubstr("10ms"));
}

TEST(QuarantinePolicyTest, FromProto_OutOfRange_NamesValueAndLimit) {
  absl::StatusOr<QuarantinePolicy> off = QuarantinePolicyFromProto(0, 0);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->after, 0);
  EXPECT_EQ(off->window, absl::Hours(1));  // the default window
  absl::StatusOr<QuarantinePolicy> two = QuarantinePolicyFromProto(2, 60'000);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->window, absl::Minutes(1));
  absl::Status many = QuarantinePolicyFromProto(2'000'000, 60'000).status();
  EXPECT_EQ(many.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(many.message(), HasSubstr("2000000"));
  EXPECT_THAT(many.message(), HasSubstr("1000000"));
  absl::Status huge = QuarantinePolicyFromProto(2, int64_t{1} << 62).status();
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.message(), HasSubstr("2592000000"));  // 30 days, the limit
  EXPECT_EQ(QuarantinePolicyFromProto(2, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(NodeLedgerTest, SetPolicy_AppliesToTheNextIncident_MarkedForStoring) {
  EXPECT_EQ(ledger_.Policy().set_unix_ms(), 0);  // the options' (flags')
  EXPECT_EQ(ledger_.Policy().after(), 2);
  EXPECT_FALSE(ledger_.TakeDirtyPolicy().has_value());
  ledger_.RecordEvents({WorkerFailed("job-a", "n1", 1, absl::ZeroDuration())});
  absl::StatusOr<v1::QuarantinePolicy> set = ledger_.SetPolicy({1, absl::Minutes(5)});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->set_unix_ms(), absl::ToUnixMillis(clock_.Now()));
  EXPECT_EQ(ledger_.Get("n1")->state(), v1::NODE_READY);  // not applied backwards
  ledger_.RecordEvents({WorkerFailed("job-b", "n2", 1, absl::ZeroDuration())});
  EXPECT_EQ(ledger_.Get("n2")->state(), v1::NODE_QUARANTINED);
  EXPECT_THAT(ledger_.Get("n2")->state_reason(), HasSubstr("after 1"));
  std::optional<v1::QuarantinePolicy> dirty = ledger_.TakeDirtyPolicy();
  ASSERT_TRUE(dirty.has_value());
  EXPECT_EQ(dirty->after(), 1);
  EXPECT_EQ(dirty->window_ms(), 300'000);
  EXPECT_FALSE(ledger_.TakeDirtyPolicy().has_value());
  ledger_.MarkPolicyDirty();  // a failed batch gives it back
  EXPECT_TRUE(ledger_.TakeDirtyPolicy().has_value());
  EXPECT_EQ(ledger_.SetPolicy({-1, absl::Hours(1)}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger_.Policy().after(), 1);  // a refused one changes nothing
}

TEST_F(NodeLedgerTest, Restore_StoredPolicyWinsOverOptions_InvalidIsDataLoss) {
  NodeLedgerOptions flags = Options();
  flags.quarantine = {0, absl::Hours(1)};  // the flags say never
  NodeLedger restored(clock_, flags);
  v1::QuarantinePolicy stored;
  stored.set_after(1);
  stored.set_window_ms(60'000);
  stored.set_set_unix_ms(42);
  ASSERT_TRUE(restored.Restore({}, stored).ok());
  EXPECT_EQ(restored.Policy().SerializeAsString(), stored.SerializeAsString());
  restored.RecordEvents({WorkerFailed("job-a", "n1", 1, absl::ZeroDuration())});
  EXPECT_EQ(restored.Get("n1")->state(), v1::NODE_QUARANTINED);
  stored.set_after(-5);
  NodeLedger broken(clock_, flags);
  EXPECT_EQ(broken.Restore({}, stored).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ddp::fleet
