#include "coordinator/session/stack_collector.h"

#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace ddp::session {
namespace {

constexpr char kAllReduce[] =
    "Thread 0x00007f0000000001 (most recent call first):\n"
    "  File \"/t/distributed_c10d.py\", line 1320 in all_reduce\n"
    "  File \"/job/train.py\", line 20 in step\n";
constexpr char kSleep[] =
    "Thread 0x00007f0000000002 (most recent call first):\n"
    "  File \"/job/train.py\", line 17 in step\n";

struct SentRequest {
  std::string job_id;
  std::string node_id;
  uint64_t request_id;
};

class StackCollectorTest : public ::testing::Test {
 protected:
  StackCollectorTest()
      : collector_(StackCollector::Options{}, clock_,
                   [this](const std::string& job, const StackCollector::Node& node, uint64_t id) {
                     if (node.node_id == unreachable_) return false;
                     sent_.push_back({job, node.node_id, id});
                     return true;
                   }) {}

  // Two nodes of two workers each: a (ranks 0, 1) and b (ranks 2, 3).
  void Collect(absl::Duration timeout = absl::ZeroDuration()) {
    ASSERT_TRUE(collector_
                    .Collect("job", 4, {{"a", 11, 0, 2}, {"b", 22, 2, 2}}, timeout,
                             [this](v1::JobStacks stacks) {
                               ASSERT_FALSE(result_.has_value()) << "done twice";
                               result_ = std::move(stacks);
                             })
                    .ok());
  }

  static v1::Stacks Answer(uint64_t id, std::vector<std::pair<int64_t, std::string>> ranks) {
    v1::Stacks stacks;
    stacks.set_request_id(id);
    for (auto& [rank, stack] : ranks) {
      v1::WorkerStack* w = stacks.add_workers();
      w->set_global_rank(rank);
      w->set_pid(static_cast<int32_t>(100 + rank));
      w->set_stack(stack);
    }
    return stacks;
  }

  FakeClock clock_;
  std::string unreachable_;
  std::vector<SentRequest> sent_;
  std::optional<v1::JobStacks> result_;
  StackCollector collector_;
};

TEST_F(StackCollectorTest, EveryNodeAnswers_RanksGroupedOddOneFirst) {
  Collect();
  ASSERT_EQ(sent_.size(), 2u);
  EXPECT_EQ(sent_[0].node_id, "a");
  EXPECT_EQ(sent_[0].request_id, sent_[1].request_id);
  const uint64_t id = sent_[0].request_id;
  collector_.OnStacks("job", "a", 11, Answer(id, {{0, kAllReduce}, {1, kAllReduce}}));
  EXPECT_FALSE(result_.has_value());
  collector_.OnStacks("job", "b", 22, Answer(id, {{2, kSleep}, {3, kAllReduce}}));
  ASSERT_TRUE(result_.has_value());
  EXPECT_EQ(result_->generation(), 4);
  EXPECT_EQ(result_->missing_nodes_size(), 0);
  ASSERT_EQ(result_->ranks_size(), 4);
  EXPECT_EQ(result_->ranks(2).node_id(), "b");
  EXPECT_EQ(result_->ranks(2).pid(), 102);
  ASSERT_EQ(result_->groups_size(), 2);
  ASSERT_EQ(result_->groups(0).ranks_size(), 1);
  EXPECT_EQ(result_->groups(0).ranks(0), 2);
  EXPECT_TRUE(absl::StrContains(result_->groups(0).stack(), "line 17 in step"));
  EXPECT_EQ(result_->groups(1).ranks_size(), 3);
}

TEST_F(StackCollectorTest, NodeSilent_NamedAtTheDeadline) {
  Collect(absl::Seconds(2));
  collector_.OnStacks("job", "a", 11, Answer(sent_[0].request_id, {{0, kSleep}, {1, kSleep}}));
  clock_.Advance(absl::Seconds(1));
  collector_.ExpireDue();
  EXPECT_FALSE(result_.has_value());
  clock_.Advance(absl::Seconds(1));
  collector_.ExpireDue();
  ASSERT_TRUE(result_.has_value());
  ASSERT_EQ(result_->missing_nodes_size(), 1);
  EXPECT_EQ(result_->missing_nodes(0), "b");
  EXPECT_TRUE(absl::StrContains(result_->ranks(3).error(), "node b did not answer within 2s"))
      << result_->ranks(3).error();
  ASSERT_EQ(result_->groups_size(), 2);
  EXPECT_EQ(result_->groups(1).stack(), "no stack: node b did not answer within 2s");
}

TEST_F(StackCollectorTest, NoSession_CompletesWithoutWaiting) {
  unreachable_ = "b";
  Collect();
  collector_.OnStacks("job", "a", 11, Answer(sent_[0].request_id, {{0, kSleep}, {1, kSleep}}));
  ASSERT_TRUE(result_.has_value());
  EXPECT_EQ(result_->missing_nodes(0), "b");
  EXPECT_TRUE(absl::StrContains(result_->ranks(2).error(), "no session"));
}

TEST_F(StackCollectorTest, ForeignRanksAndIncarnations_Ignored) {
  Collect();
  const uint64_t id = sent_[0].request_id;
  // Rank 2 is node b's; an old incarnation of a; another job.
  collector_.OnStacks("job", "a", 11, Answer(id, {{2, kSleep}, {0, kAllReduce}}));
  collector_.OnStacks("job", "b", 21, Answer(id, {{2, kSleep}}));
  collector_.OnStacks("other", "b", 22, Answer(id, {{2, kSleep}}));
  EXPECT_FALSE(result_.has_value());
  collector_.OnStacks("job", "b", 22, Answer(id, {{3, kAllReduce}}));
  ASSERT_TRUE(result_.has_value());
  EXPECT_TRUE(absl::StrContains(result_->ranks(1).error(), "no running worker of rank 1"));
  EXPECT_TRUE(absl::StrContains(result_->ranks(2).error(), "no running worker of rank 2"));
  EXPECT_EQ(result_->ranks(0).stack(), kAllReduce);
}

TEST_F(StackCollectorTest, LongStack_Cut) {
  Collect();
  const uint64_t id = sent_[0].request_id;
  std::string huge;
  while (huge.size() < (200 << 10)) huge += "  File \"/x.py\", line 1 in f\n";
  collector_.OnStacks("job", "a", 11, Answer(id, {{0, huge}, {1, kSleep}}));
  collector_.OnStacks("job", "b", 22, Answer(id, {{2, kSleep}, {3, kSleep}}));
  ASSERT_TRUE(result_.has_value());
  EXPECT_LE(result_->ranks(0).stack().size(), (64u << 10) + 64);
  EXPECT_TRUE(absl::StrContains(result_->ranks(0).stack(), "cut at 65536 bytes"));
}

TEST_F(StackCollectorTest, BadTimeoutAndTooMany_Refused) {
  auto ignore = [](v1::JobStacks) {};
  absl::Status s = collector_.Collect("job", 1, {}, absl::Minutes(5), ignore);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "5m")) << s;
  s = collector_.Collect("job", 1, {}, -absl::Seconds(1), ignore);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(collector_.Collect("job", 1, {{"a", 11, 0, 1}}, absl::ZeroDuration(), ignore).ok());
  }
  s = collector_.Collect("job", 1, {{"a", 11, 0, 1}}, absl::ZeroDuration(), ignore);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
}

TEST_F(StackCollectorTest, RealClockDeadline_ThreadCompletes) {
  std::optional<v1::JobStacks> got;
  absl::Notification done;
  StackCollector real(
      {}, RealClock::Get(),
      [](const std::string&, const StackCollector::Node&, uint64_t) { return true; });
  ASSERT_TRUE(real.Collect("job", 1, {{"a", 1, 0, 1}}, absl::Milliseconds(50),
                           [&](v1::JobStacks s) {
                             got = std::move(s);
                             done.Notify();
                           })
                  .ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(got->missing_nodes(0), "a");
}

// At a declared hang every agent sends its stacks unasked (request_id 0):
// kept per job for the newest generation, grouped like an answer.
TEST_F(StackCollectorTest, StacksAtHang_KeptPerJob_NewestGenerationGrouped) {
  EXPECT_EQ(collector_.LastHangStacks("job").status().code(), absl::StatusCode::kNotFound);
  v1::Stacks a = Answer(0, {{0, kAllReduce}, {1, kSleep}});
  a.mutable_header()->set_generation(4);
  v1::Stacks b = Answer(0, {{2, kAllReduce}, {3, kAllReduce}});
  b.mutable_header()->set_generation(4);
  collector_.OnStacks("job", "a", 11, a);
  collector_.OnStacks("job", "b", 22, b);
  absl::StatusOr<v1::JobStacks> got = collector_.LastHangStacks("job");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->generation(), 4);
  ASSERT_EQ(got->ranks_size(), 4);
  EXPECT_EQ(got->ranks(1).node_id(), "a");
  EXPECT_EQ(got->ranks(2).node_id(), "b");
  ASSERT_EQ(got->groups_size(), 2);
  ASSERT_EQ(got->groups(0).ranks_size(), 1);  // the sleeping rank stands out
  EXPECT_EQ(got->groups(0).ranks(0), 1);
  EXPECT_EQ(got->groups(1).ranks_size(), 3);
  EXPECT_TRUE(sent_.empty());  // nobody was asked
  EXPECT_EQ(collector_.LastHangStacks("other").status().code(), absl::StatusCode::kNotFound);

  // An older generation's late stacks change nothing; a newer hang replaces.
  v1::Stacks stale = Answer(0, {{0, kSleep}});
  stale.mutable_header()->set_generation(3);
  collector_.OnStacks("job", "a", 11, stale);
  EXPECT_EQ(collector_.LastHangStacks("job")->ranks_size(), 4);
  v1::Stacks next = Answer(0, {{0, kSleep}});
  next.mutable_header()->set_generation(5);
  collector_.OnStacks("job", "a", 11, next);
  got = collector_.LastHangStacks("job");
  EXPECT_EQ(got->generation(), 5);
  EXPECT_EQ(got->ranks_size(), 1);
}

TEST(StackCollectorLimits, StacksAtHang_OldestJobDroppedBeyondTheLimit) {
  FakeClock clock;
  StackCollector::Options options;
  options.max_jobs_with_hang_stacks = 2;
  options.max_workers_per_node = 1;
  StackCollector collector(options, clock, [](auto&, auto&, uint64_t) { return true; });
  for (const char* job : {"j1", "j2", "j3"}) {
    v1::Stacks s;
    s.mutable_header()->set_generation(1);
    for (int rank = 0; rank < 3; ++rank) s.add_workers()->set_global_rank(rank);
    collector.OnStacks(job, "a", 1, s);
    clock.Advance(absl::Seconds(1));
  }
  EXPECT_EQ(collector.LastHangStacks("j1").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(collector.LastHangStacks("j3").ok());
  EXPECT_EQ(collector.LastHangStacks("j3")->ranks_size(), 1);  // max_workers_per_node
}

}  // namespace
}  // namespace ddp::session
