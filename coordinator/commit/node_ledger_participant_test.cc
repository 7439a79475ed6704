#include "coordinator/commit/node_ledger_participant.h"

#include <memory>

#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "coordinator/commit/commit_loop.h"
#include "coordinator/storage/memory_state_store.h"
#include "gtest/gtest.h"

namespace ddp::commit {
namespace {

// True once everything the ledger changed so far is durable (10 s at most).
bool Durable(NodeLedgerParticipant& participant) {
  absl::Notification done;
  participant.WhenDurable([&] { done.Notify(); });
  return done.WaitForNotificationWithTimeout(absl::Seconds(10));
}

CommitLoopOptions NoTicker() {
  CommitLoopOptions options;
  options.tick_interval = absl::ZeroDuration();
  options.retry_interval = absl::Milliseconds(1);
  return options;
}

TEST(NodeLedgerParticipantTest, Open_RestoresStoredNodes) {
  storage::MemoryStateStore store;
  StateBatch batch;
  v1::Node node;
  node.set_node_id("n1");
  node.set_state(v1::NODE_CORDONED);
  batch.nodes.push_back(node);
  ASSERT_TRUE(store.CommitState(batch).ok());
  FakeClock clock;
  CommitLoop loop(store, NoTicker());
  auto participant = NodeLedgerParticipant::Open(loop, clock, {});
  ASSERT_TRUE(participant.ok()) << participant.status();
  EXPECT_EQ((*participant)->ledger().Get("n1")->state(), v1::NODE_CORDONED);
  loop.Shutdown();
}

TEST(NodeLedgerParticipantTest, Cordon_DurableBeforeWhenDurableRuns) {
  storage::MemoryStateStore store;
  FakeClock clock;
  CommitLoop loop(store, NoTicker());
  auto participant = NodeLedgerParticipant::Open(loop, clock, {});
  ASSERT_TRUE(participant.ok());
  loop.Start();
  ASSERT_TRUE((*participant)->ledger().Cordon("n1", "fan").ok());
  absl::Notification done;
  size_t stored_when_done = 0;
  (*participant)->WhenDurable([&] {
    stored_when_done = store.LoadNodes()->size();
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(stored_when_done, 1u);
  loop.Shutdown();
}

TEST(NodeLedgerParticipantTest, FailedCommit_RecordsWrittenByTheNextOne) {
  storage::MemoryStateStore store;
  FakeClock clock;
  CommitLoop loop(store, NoTicker());
  auto participant = NodeLedgerParticipant::Open(loop, clock, {});
  ASSERT_TRUE(participant.ok());
  loop.Start();
  store.FailWith(absl::UnavailableError("injected"));
  ASSERT_TRUE((*participant)->ledger().Cordon("n1", "").ok());
  loop.Flush();
  EXPECT_TRUE(store.LoadNodes()->empty());
  store.FailWith(absl::OkStatus());
  ASSERT_TRUE(Durable(**participant));
  ASSERT_EQ(store.LoadNodes()->size(), 1u);
  EXPECT_EQ((*store.LoadNodes())[0].state(), v1::NODE_CORDONED);
  loop.Shutdown();
}

// A policy set through the API outlives the coordinator: a new participant on
// the same store (a restart) has it, over the options (the flags).
TEST(NodeLedgerParticipantTest, SetPolicy_StoredAndRestoredOverTheFlags) {
  storage::MemoryStateStore store;
  FakeClock clock;
  {
    CommitLoop loop(store, NoTicker());
    auto participant = NodeLedgerParticipant::Open(loop, clock, {});
    ASSERT_TRUE(participant.ok());
    loop.Start();
    ASSERT_TRUE((*participant)->ledger().SetPolicy({1, absl::Minutes(10)}).ok());
    ASSERT_TRUE(Durable(**participant));
    loop.Shutdown();
  }
  ASSERT_TRUE(store.LoadQuarantinePolicy()->has_value());
  CommitLoop loop(store, NoTicker());
  fleet::NodeLedgerOptions flags;
  flags.quarantine = {5, absl::Hours(1)};
  auto participant = NodeLedgerParticipant::Open(loop, clock, flags);
  ASSERT_TRUE(participant.ok()) << participant.status();
  EXPECT_EQ((*participant)->ledger().Policy().after(), 1);
  EXPECT_EQ((*participant)->ledger().Policy().window_ms(), 600'000);
  loop.Shutdown();
}

TEST(NodeLedgerParticipantTest, SetPolicy_FailedCommit_WrittenByTheNextOne) {
  storage::MemoryStateStore store;
  FakeClock clock;
  CommitLoop loop(store, NoTicker());
  auto participant = NodeLedgerParticipant::Open(loop, clock, {});
  ASSERT_TRUE(participant.ok());
  loop.Start();
  store.FailWith(absl::UnavailableError("injected"));
  ASSERT_TRUE((*participant)->ledger().SetPolicy({3, absl::Hours(2)}).ok());
  loop.Flush();
  EXPECT_FALSE(store.LoadQuarantinePolicy()->has_value());
  store.FailWith(absl::OkStatus());
  ASSERT_TRUE(Durable(**participant));
  ASSERT_TRUE(store.LoadQuarantinePolicy()->has_value());
  EXPECT_EQ((*store.LoadQuarantinePolicy())->after(), 3);
  loop.Shutdown();
}

}  // namespace
}  // namespace ddp::commit
