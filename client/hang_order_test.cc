#include "client/hang_order.h"

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

HungWorker Hung(size_t index, int rank, absl::Duration touch, absl::Duration mtime) {
  return HungWorker{index, rank, kT0 + touch, kT0 + mtime};
}

HungWorker WithProcess(HungWorker worker, char state, bool cpu_progress) {
  worker.process_state = state;
  worker.cpu_progress = cpu_progress;
  return worker;
}

std::vector<size_t> Indices(const std::vector<HungWorker>& hung) {
  std::vector<size_t> out;
  for (const HungWorker& h : hung) out.push_back(h.index);
  return out;
}

TEST(OrderHungWorkersTest, OldestObservedTouchFirst) {
  std::vector<HungWorker> hung = {Hung(0, 0, absl::Milliseconds(200), absl::Milliseconds(150)),
                                  Hung(1, 1, absl::Milliseconds(100), absl::Milliseconds(190)),
                                  Hung(2, 2, absl::Milliseconds(300), absl::Milliseconds(0))};
  OrderHungWorkers(hung);
  EXPECT_EQ(Indices(hung), (std::vector<size_t>{1, 0, 2}));
}

TEST(OrderHungWorkersTest, SameCheck_OlderMtimeFirst) {
  // Both touches were first seen by the same check: the mtimes decide.
  std::vector<HungWorker> hung = {Hung(0, 0, absl::Milliseconds(100), absl::Milliseconds(90)),
                                  Hung(1, 1, absl::Milliseconds(100), absl::Milliseconds(20))};
  OrderHungWorkers(hung);
  EXPECT_EQ(Indices(hung), (std::vector<size_t>{1, 0}));
}

TEST(OrderHungWorkersTest, Indistinguishable_LowerGlobalRankFirst) {
  std::vector<HungWorker> hung = {Hung(0, 5, absl::ZeroDuration(), absl::ZeroDuration()),
                                  Hung(1, 4, absl::ZeroDuration(), absl::ZeroDuration())};
  OrderHungWorkers(hung);
  EXPECT_EQ(Indices(hung), (std::vector<size_t>{1, 0}));
}

TEST(OrderHungWorkersTest, StoppedProcessFirst_EvenWithAYoungerHeartbeat) {
  // The SIGSTOPped worker touched its file 6 ms after its blocked peer.
  std::vector<HungWorker> hung = {
      WithProcess(Hung(0, 0, absl::Milliseconds(100), absl::Milliseconds(94)), 'S', false),
      WithProcess(Hung(1, 1, absl::Milliseconds(100), absl::Milliseconds(100)), 'T', false)};
  OrderHungWorkers(hung);
  EXPECT_EQ(Indices(hung), (std::vector<size_t>{1, 0}));
  EXPECT_NE(HangEvidence(hung[0]).find("stopped"), std::string::npos);
  EXPECT_EQ(HangEvidence(hung[1]), "");
}

TEST(OrderHungWorkersTest, EvidenceClasses_StoppedThenDiskWaitThenBusyThenRest) {
  std::vector<HungWorker> hung = {
      WithProcess(Hung(0, 0, absl::ZeroDuration(), absl::ZeroDuration()), 'S', false),
      WithProcess(Hung(1, 1, absl::Milliseconds(1), absl::ZeroDuration()), 'R', true),
      WithProcess(Hung(2, 2, absl::Milliseconds(2), absl::ZeroDuration()), 'D', false),
      WithProcess(Hung(3, 3, absl::Milliseconds(3), absl::ZeroDuration()), 't', false)};
  OrderHungWorkers(hung);
  EXPECT_EQ(Indices(hung), (std::vector<size_t>{3, 2, 1, 0}));
}

}  // namespace
}  // namespace ddp::client
