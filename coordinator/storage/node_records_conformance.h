#ifndef DDP_COORDINATOR_STORAGE_NODE_RECORDS_CONFORMANCE_H_
#define DDP_COORDINATOR_STORAGE_NODE_RECORDS_CONFORMANCE_H_

// The contract of commit::StateStore's node records (StateBatch::nodes,
// LoadNodes: the fleet's health ledger; StateBatch::quarantine_policy,
// LoadQuarantinePolicy: the cluster's policy) as one typed GoogleTest suite. Every
// StateStore instantiates it with a factory F of the same shape as the job
// conformance suite's (job_state_store_conformance.h), over commit::StateStore:
//
//   INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, NodeRecordsConformanceTest, F);
//
// Tests that check what was stored call Reopen() first, so a durable store
// proves that the records survive close + open.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/commit/state_store.h"
#include "gtest/gtest.h"

namespace ddp::storage::conformance {

inline v1::Node FleetNode(const std::string& id, v1::NodeState state, int incidents = 0) {
  v1::Node node;
  node.set_node_id(id);
  node.set_state(state);
  node.set_state_reason(state == v1::NODE_READY ? "" : "why");
  for (int i = 0; i < incidents; ++i) {
    v1::NodeIncident* incident = node.add_incidents();
    incident->set_kind(v1::NODE_INCIDENT_WORKER_FAILED);
    incident->set_job_id("job-" + std::to_string(i));
    incident->set_time_unix_ms(1000 + i);
    incident->set_counted(true);
  }
  node.set_incident_count(incidents);
  return node;
}

template <typename F>
class NodeRecordsConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<commit::StateStore>> store = factory_.Open();
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void Commit(std::vector<v1::Node> nodes) {
    commit::StateBatch batch;
    batch.nodes = std::move(nodes);
    ASSERT_TRUE(store_->CommitState(batch).ok());
  }
  // Reopens the store, then loads its node records.
  std::vector<v1::Node> ReopenAndLoad() {
    absl::StatusOr<std::unique_ptr<commit::StateStore>> store = factory_.Reopen(std::move(store_));
    EXPECT_TRUE(store.ok()) << store.status();
    if (!store.ok()) return {};
    store_ = *std::move(store);
    absl::StatusOr<std::vector<v1::Node>> nodes = store_->LoadNodes();
    EXPECT_TRUE(nodes.ok()) << nodes.status();
    return nodes.ok() ? *nodes : std::vector<v1::Node>{};
  }

  F factory_;
  std::unique_ptr<commit::StateStore> store_;
};

TYPED_TEST_SUITE_P(NodeRecordsConformanceTest);

TYPED_TEST_P(NodeRecordsConformanceTest, Empty_LoadsNone) {
  EXPECT_TRUE(this->ReopenAndLoad().empty());
}

TYPED_TEST_P(NodeRecordsConformanceTest, Committed_SurviveReopenWhole) {
  this->Commit({FleetNode("b", v1::NODE_QUARANTINED, 3), FleetNode("a", v1::NODE_READY)});
  std::vector<v1::Node> nodes = this->ReopenAndLoad();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].node_id(), "a");  // by node id
  EXPECT_EQ(nodes[1].SerializeAsString(),
            FleetNode("b", v1::NODE_QUARANTINED, 3).SerializeAsString());
}

TYPED_TEST_P(NodeRecordsConformanceTest, Upsert_LastOneWins_OthersKept) {
  this->Commit({FleetNode("a", v1::NODE_READY), FleetNode("b", v1::NODE_READY)});
  this->Commit({FleetNode("a", v1::NODE_CORDONED, 1), FleetNode("a", v1::NODE_QUARANTINED, 2)});
  std::vector<v1::Node> nodes = this->ReopenAndLoad();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].state(), v1::NODE_QUARANTINED);
  EXPECT_EQ(nodes[0].incidents_size(), 2);
  EXPECT_EQ(nodes[1].state(), v1::NODE_READY);
}

// Node ids are proto3 strings (UTF-8); any of them round-trips, NUL and '/'
// included.
TYPED_TEST_P(NodeRecordsConformanceTest, OddIds_RoundTrip) {
  const std::string id("n\0/\xc3\xa9", 5);
  this->Commit({FleetNode(id, v1::NODE_CORDONED)});
  std::vector<v1::Node> nodes = this->ReopenAndLoad();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].node_id(), id);
}

inline v1::QuarantinePolicy Policy(int after, int64_t window_ms, int64_t set_unix_ms) {
  v1::QuarantinePolicy policy;
  policy.set_after(after);
  policy.set_window_ms(window_ms);
  policy.set_set_unix_ms(set_unix_ms);
  return policy;
}

TYPED_TEST_P(NodeRecordsConformanceTest, QuarantinePolicy_NeverSet_LoadsNone) {
  this->Commit({FleetNode("a", v1::NODE_READY)});
  this->ReopenAndLoad();
  absl::StatusOr<std::optional<v1::QuarantinePolicy>> policy = this->store_->LoadQuarantinePolicy();
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_FALSE(policy->has_value());
}

TYPED_TEST_P(NodeRecordsConformanceTest, QuarantinePolicy_LastSetSurvivesReopen_NodesKept) {
  commit::StateBatch first;
  first.quarantine_policy = Policy(3, 3'600'000, 1000);
  first.nodes = {FleetNode("a", v1::NODE_READY)};
  ASSERT_TRUE(this->store_->CommitState(first).ok());
  commit::StateBatch second;  // a batch with the policy alone
  second.quarantine_policy = Policy(0, 60'000, 2000);
  ASSERT_TRUE(this->store_->CommitState(second).ok());
  this->Commit({FleetNode("b", v1::NODE_READY)});  // a batch without: the policy stays
  EXPECT_EQ(this->ReopenAndLoad().size(), 2u);
  absl::StatusOr<std::optional<v1::QuarantinePolicy>> policy = this->store_->LoadQuarantinePolicy();
  ASSERT_TRUE(policy.ok()) << policy.status();
  ASSERT_TRUE(policy->has_value());
  EXPECT_EQ((*policy)->SerializeAsString(), Policy(0, 60'000, 2000).SerializeAsString());
}

REGISTER_TYPED_TEST_SUITE_P(NodeRecordsConformanceTest, Empty_LoadsNone,
                            Committed_SurviveReopenWhole, Upsert_LastOneWins_OthersKept,
                            OddIds_RoundTrip, QuarantinePolicy_NeverSet_LoadsNone,
                            QuarantinePolicy_LastSetSurvivesReopen_NodesKept);

}  // namespace ddp::storage::conformance

#endif  // DDP_COORDINATOR_STORAGE_NODE_RECORDS_CONFORMANCE_H_
