#include "coordinator/session/session_router.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace ddp::session {
namespace {

class FakeSink final : public SessionSink {
 public:
  void Deliver(const rendezvous::OutboundMessage& message) override {
    absl::MutexLock lock(&mu_);
    delivered_.push_back(message);
  }
  void Close(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    closed_ = status;
  }
  std::vector<rendezvous::OutboundMessage> delivered() const {
    absl::MutexLock lock(&mu_);
    return delivered_;
  }
  absl::Status closed() const {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<rendezvous::OutboundMessage> delivered_ ABSL_GUARDED_BY(mu_);
  absl::Status closed_ ABSL_GUARDED_BY(mu_);
};

rendezvous::OutboundMessage Message(const std::string& node, rendezvous::Incarnation incarnation,
                                    rendezvous::Generation generation) {
  rendezvous::OutboundMessage m;
  m.job_id = "job";
  m.node_id = node;
  m.incarnation = incarnation;
  m.body = rendezvous::RequestMasterInfo{generation};
  return m;
}

TEST(SessionRouter, Route_MatchingIncarnation_Delivered) {
  SessionRouter router;
  auto sink = std::make_shared<FakeSink>();
  router.Attach("job", "a", 7, sink);
  EXPECT_TRUE(router.Route(Message("a", 7, 1)));
  ASSERT_EQ(sink->delivered().size(), 1u);
  EXPECT_EQ(sink->delivered()[0].node_id, "a");
  EXPECT_EQ(router.routed(), 1);
  EXPECT_EQ(router.dropped(), 0);
}

TEST(SessionRouter, Route_OtherIncarnationOrNode_DroppedAndCounted) {
  SessionRouter router;
  auto sink = std::make_shared<FakeSink>();
  router.Attach("job", "a", 7, sink);
  EXPECT_FALSE(router.Route(Message("a", 6, 1)));
  EXPECT_FALSE(router.Route(Message("b", 7, 1)));
  EXPECT_TRUE(sink->delivered().empty());
  EXPECT_EQ(router.dropped(), 2);
}

TEST(SessionRouter, Attach_TwoIncarnationsBeforeConfirm_BothReachable) {
  SessionRouter router;
  auto old_sink = std::make_shared<FakeSink>();
  auto new_sink = std::make_shared<FakeSink>();
  router.Attach("job", "a", 1, old_sink);
  router.Attach("job", "a", 2, new_sink);
  EXPECT_TRUE(router.Route(Message("a", 1, 1)));
  EXPECT_TRUE(router.Route(Message("a", 2, 1)));
  EXPECT_EQ(old_sink->delivered().size(), 1u);
  EXPECT_EQ(new_sink->delivered().size(), 1u);

  std::vector<SessionRouter::SinkPtr> displaced = router.Confirm("job", "a", new_sink.get());
  ASSERT_EQ(displaced.size(), 1u);
  EXPECT_EQ(displaced[0].get(), old_sink.get());
  EXPECT_FALSE(router.Route(Message("a", 1, 2)));
  EXPECT_EQ(router.session_count(), 1);
  // The displaced stream's own Detach reports it was no longer current.
  EXPECT_FALSE(router.Detach("job", "a", old_sink.get()));
  EXPECT_TRUE(router.Detach("job", "a", new_sink.get()));
  EXPECT_EQ(router.session_count(), 0);
}

TEST(SessionRouter, SameIncarnationTwice_NewestGetsMessages) {
  SessionRouter router;
  auto first = std::make_shared<FakeSink>();
  auto second = std::make_shared<FakeSink>();
  router.Attach("job", "a", 5, first);
  router.Attach("job", "a", 5, second);
  router.Route(Message("a", 5, 1));
  EXPECT_TRUE(first->delivered().empty());
  EXPECT_EQ(second->delivered().size(), 1u);
}

TEST(SessionRouter, DetachUnconfirmed_OlderSessionKeepsRouting) {
  SessionRouter router;
  auto old_sink = std::make_shared<FakeSink>();
  auto refused = std::make_shared<FakeSink>();
  router.Attach("job", "a", 1, old_sink);
  router.Attach("job", "a", 2, refused);
  EXPECT_TRUE(router.Detach("job", "a", refused.get()));
  EXPECT_TRUE(router.Route(Message("a", 1, 1)));
  EXPECT_EQ(old_sink->delivered().size(), 1u);
  EXPECT_TRUE(router.Confirm("job", "a", refused.get()).empty());
}

TEST(SessionRouter, CloseAll_ClosesEverySinkWithStatus) {
  SessionRouter router;
  auto a = std::make_shared<FakeSink>();
  auto b = std::make_shared<FakeSink>();
  router.Attach("job", "a", 1, a);
  router.Attach("job", "b", 1, b);
  router.CloseAll(absl::UnavailableError("bye"));
  EXPECT_TRUE(absl::IsUnavailable(a->closed()));
  EXPECT_TRUE(absl::IsUnavailable(b->closed()));
  EXPECT_EQ(router.session_count(), 0);
  EXPECT_FALSE(router.Route(Message("a", 1, 1)));
}

}  // namespace
}  // namespace ddp::session
