// A 4,096-node rendezvous through the registry with a store: the join path must
// be O(1) per node (one stored node record per join, no scans), and the whole
// rendezvous must take well under a second of CPU.

#include <chrono>

#include "absl/strings/str_cat.h"
#include "coordinator/rendezvous/job_registry.h"
#include "coordinator/rendezvous/job_test_util.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

// Counts what reaches the store.
class CountingStore final : public JobStateStore {
 public:
  absl::Status Apply(const JobChanges& changes) override {
    ++applies;
    node_records += changes.upserted_nodes.size();
    if (changes.job) ++job_records;
    return inner.Apply(changes);
  }
  absl::StatusOr<std::vector<JobSnapshot>> LoadAll() const override { return inner.LoadAll(); }
  absl::StatusOr<JobEventCounts> LoadEventCounts() const override {
    return inner.LoadEventCounts();
  }
  InMemoryJobStateStore inner;
  int64_t applies = 0;
  int64_t node_records = 0;
  int64_t job_records = 0;
};

TEST(JobScale, FourThousandNodes_RendezvousLinearAndFast) {
  constexpr int kNodes = 4096;
  FakeClock clock;
  CountingStore store;
  JobRegistry registry(clock, &store, {});
  JobSettings settings = testing::Settings(kNodes, kNodes);
  settings.set_nproc_per_node(8);

  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kNodes; ++i) {
    RegisterRequest r;
    r.job_id = "big";
    r.node_id = absl::StrCat("node-", i);
    r.incarnation = 1000 + i;
    r.address = absl::StrCat("10.0.", i / 256, ".", i % 256);
    r.settings = settings;
    ASSERT_TRUE(registry.Register(r).ok()) << i;
    if (i == kNodes - 2) {
      ASSERT_TRUE(registry.PersistPending().ok());
      // Before the close: exactly one node record and no job record per join.
      EXPECT_EQ(store.node_records, kNodes - 1);
      EXPECT_EQ(store.job_records, 1);  // the creation
    }
  }
  ASSERT_TRUE(registry.PersistPending().ok());
  ASSERT_EQ(registry.GetJob("big", false)->state(), v1::STARTING);
  Outbox out = registry.TakeOutbox();
  auto request = testing::MessagesOf<RequestMasterInfo>(out);
  ASSERT_EQ(request.size(), 1u);
  ASSERT_TRUE(registry
                  .ReportMasterInfo(NodeRef{"big", "node-0", 1000, 1},
                                    NewMasterInfo("", 29500, testing::NcclId()))
                  .ok());
  ASSERT_TRUE(registry.PersistPending().ok());
  out = registry.TakeOutbox();
  // Heartbeats of every node and a tick, as one heartbeat interval would bring.
  for (int i = 0; i < kNodes; ++i) {
    ASSERT_TRUE(registry
                    .Heartbeat(NodeRef{"big", absl::StrCat("node-", i),
                                       static_cast<Incarnation>(1000 + i), 1})
                    .ok());
  }
  registry.Tick();
  ASSERT_TRUE(registry.PersistPending().ok());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  auto assignments = testing::MessagesOf<Assignment>(out);
  ASSERT_EQ(assignments.size(), static_cast<size_t>(kNodes));
  EXPECT_EQ(assignments.back().world_size, int64_t{kNodes} * 8);
  EXPECT_EQ(registry.GetJob("big", false)->state(), v1::RUNNING);
  // Closing writes each changed member once more (its rank), not per join.
  EXPECT_LE(store.node_records, 2 * kNodes);
  EXPECT_LT(seconds, 1.0) << "4,096-node rendezvous took " << seconds << " s";
  RecordProperty("rendezvous_seconds", absl::StrCat(seconds));
  std::printf("4096-node rendezvous (register+close+assign+heartbeat): %.3f s\n", seconds);
}

}  // namespace
}  // namespace ddp::rendezvous
