#include "client/hang_order.h"

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

HungWorker Hung(size_t index, int rank, absl::Duration touch, absl::Duration mtime) {
  return HungWorker{index, rank, kT0 + touch, kT0 + mtime};
}

std::vector<size_t> Indices(const std::vector<HungWorker>& hung) {
  std::vector<size_t> out;
  for (const HungWorker& h : hung) out.push_back(h.index);
  return out;
}

TEST(OrderByLastHeartbeatTest, OldestObservedTouchFirst) {
  std::vector<HungWorker> hung = {Hung(0, 0, absl::Milliseconds(200), absl::Milliseconds(150)),
                                  Hung(1, 1, absl::Milliseconds(100), absl::Milliseconds(190)),
                                  Hung(2, 2, absl::Milliseconds(300), absl::Milliseconds(0))};
  OrderByLastHeartbeat(hung);
  EXPECT_EQ(Indices(hung), (std::vector<size_t>{1, 0, 2}));
}

TEST(OrderByLastHeartbeatTest, SameCheck_OlderMtimeFirst) {
  // Both touches were first seen by the same check: the mtimes decide.
  std::vector<HungWorker> hung = {Hung(0, 0, absl::Milliseconds(100), absl::Milliseconds(90)),
                                  Hung(1, 1, absl::Milliseconds(100), absl::Milliseconds(20))};
  OrderByLastHeartbeat(hung);
  EXPECT_EQ(Indices(hung), (std::vector<size_t>{1, 0}));
}

TEST(OrderByLastHeartbeatTest, Indistinguishable_LowerGlobalRankFirst) {
  std::vector<HungWorker> hung = {Hung(0, 5, absl::ZeroDuration(), absl::ZeroDuration()),
                                  Hung(1, 4, absl::ZeroDuration(), absl::ZeroDuration())};
  OrderByLastHeartbeat(hung);
  EXPECT_EQ(Indices(hung), (std::vector<size_t>{1, 0}));
}

}  // namespace
}  // namespace ddp::client
