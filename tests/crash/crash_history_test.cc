#include "tests/crash/crash_history.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A consistent history: two clients, one crash between revisions 2 and 3.
struct Fixture {
  CrashHistory history;
  FinalState state;
  Fixture() {
    history.counter_key = "counter";
    history.acked = {
        {0, "put/0/0", "v00", false, 1, 10, 20},
        {1, "counter", "", true, 2, 15, 25},
        {0, "put/0/1", "v01", false, 3, 200, 210},
        {1, "counter", "", true, 4, 205, 215},
    };
    history.attempted_adds = 3;
    history.crashes = {{100, 150, 2}};
    history.watched = {{"put/0/0", 1}, {"counter", 2}, {"put/0/1", 3}, {"counter", 4}};
    state.kvs = {{"put/0/0", "v00"}, {"put/0/1", "v01"}, {"counter", "2"}};
    state.counter = 2;
  }
};

TEST(FindViolations, ConsistentHistory_NoViolation) {
  Fixture f;
  EXPECT_THAT(FindViolations(f.history, f.state), IsEmpty());
}

TEST(FindViolations, AckedPutMissing_Reported) {
  Fixture f;
  f.state.kvs.erase("put/0/1");
  EXPECT_THAT(FindViolations(f.history, f.state),
              ElementsAre(HasSubstr("put/0/1 (revision 3) is missing")));
}

TEST(FindViolations, AckedPutWrongValue_Reported) {
  Fixture f;
  f.state.kvs["put/0/0"] = "stale";
  EXPECT_THAT(FindViolations(f.history, f.state),
              ElementsAre(HasSubstr("value 'stale', expected 'v00'")));
}

TEST(FindViolations, CounterOutsideBounds_Reported) {
  Fixture f;
  f.state.counter = 1;
  EXPECT_THAT(FindViolations(f.history, f.state), ElementsAre(HasSubstr("lost adds")));
  f.state.counter = 4;
  EXPECT_THAT(FindViolations(f.history, f.state),
              ElementsAre(HasSubstr("only 3 adds were attempted")));
}

TEST(FindViolations, RevisionBackwardsAfterRestart_Reported) {
  Fixture f;
  f.history.acked[2].revision = 1;  // Reused revision after the crash.
  f.history.watched[2].revision = 1;
  const std::vector<std::string> violations = FindViolations(f.history, f.state);
  EXPECT_THAT(violations, ::testing::Contains(HasSubstr("crash 0")));
  EXPECT_THAT(violations, ::testing::Contains(HasSubstr("client 0")));
}

TEST(FindViolations, StatusRevisionBehindAcked_Reported) {
  Fixture f;
  f.history.crashes[0].status_revision_after = 1;
  EXPECT_THAT(FindViolations(f.history, f.state),
              ElementsAre(HasSubstr("Status revision after restart 1 < 2")));
}

TEST(FindViolations, WatchGapDuplicateOrDisorder_Reported) {
  Fixture f;
  f.history.watched.erase(f.history.watched.begin() + 2);
  EXPECT_THAT(FindViolations(f.history, f.state),
              ElementsAre(HasSubstr("never saw acknowledged write of put/0/1")));
  Fixture g;
  g.history.watched.push_back({"counter", 4});
  EXPECT_THAT(FindViolations(g.history, g.state),
              ElementsAre(HasSubstr("(4, counter) delivered twice")));
  Fixture h;
  std::swap(h.history.watched[0], h.history.watched[1]);
  EXPECT_THAT(FindViolations(h.history, h.state),
              ElementsAre(HasSubstr("revision 1 arrived after 2")));
}

}  // namespace
}  // namespace ddp::testing
