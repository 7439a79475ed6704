#include "client/agent/worker_lease.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

// Records what the lease did; waits (in real time) for the lease thread.
struct Recorder {
  absl::Mutex mu;
  std::vector<bool> freezes;  // true: frozen, false: thawed
  std::vector<int64_t> expired;

  bool AwaitActions(size_t n) {
    absl::MutexLock lock(&mu);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return freezes.size() >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(10));
  }
  size_t ActionCount() {
    absl::MutexLock lock(&mu);
    return freezes.size();
  }
};

class WorkerLeaseTest : public ::testing::Test {
 protected:
  WorkerLeaseTest()
      : file_(::testing::TempDir() + "/lease-" + std::to_string(getpid()) + ".json"),
        lease_(
            clock_, WorkerLease::Options{file_, absl::Milliseconds(2)},
            [this](bool freeze) {
              absl::MutexLock lock(&recorder_.mu);
              recorder_.freezes.push_back(freeze);
            },
            [this](int64_t generation) {
              absl::MutexLock lock(&recorder_.mu);
              recorder_.expired.push_back(generation);
            }) {}

  std::string File() {
    std::ifstream in(file_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  // Lets the lease thread look at the clock a few times.
  static void Settle() { absl::SleepFor(absl::Milliseconds(30)); }

  FakeClock clock_;
  std::string file_;
  Recorder recorder_;
  WorkerLease lease_;
};

TEST_F(WorkerLeaseTest, RunsFromTheSendTimeOfTheLastAcknowledgedHeartbeat) {
  lease_.Configure(absl::Seconds(2));
  const absl::Time sent = clock_.Now();
  clock_.Advance(absl::Milliseconds(300));  // the ack arrives 300 ms later
  lease_.Renewed(sent, 1);
  EXPECT_EQ(lease_.expiry(), sent + absl::Seconds(2));
  // An older send time (a Registered answering an earlier Register) never
  // shortens the lease.
  lease_.Renewed(sent - absl::Seconds(1), 1);
  EXPECT_EQ(lease_.expiry(), sent + absl::Seconds(2));
}

TEST_F(WorkerLeaseTest, RunsOut_FreezesArmedWorkers_ThawsOnAFreshRenewalOfTheirGeneration) {
  lease_.Configure(absl::Seconds(2));
  const absl::Time sent = clock_.Now();
  lease_.Renewed(sent, 7);
  lease_.Arm(7);
  clock_.Advance(absl::Milliseconds(1999));
  Settle();
  EXPECT_EQ(recorder_.ActionCount(), 0u);
  clock_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(recorder_.AwaitActions(1));
  {
    absl::MutexLock lock(&recorder_.mu);
    auto expired = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(recorder_.mu) {
      return !recorder_.expired.empty();
    };
    recorder_.mu.AwaitWithTimeout(absl::Condition(&expired), absl::Seconds(10));
    EXPECT_EQ(recorder_.freezes, std::vector<bool>{true});
    EXPECT_EQ(recorder_.expired, std::vector<int64_t>{7});
  }
  EXPECT_TRUE(lease_.frozen());
  EXPECT_NE(File().find("\"current\": false"), std::string::npos) << File();
  // Frozen for as long as the coordinator is away: nothing more happens.
  clock_.Advance(absl::Minutes(5));
  Settle();
  EXPECT_EQ(recorder_.ActionCount(), 1u);
  // A late acknowledgement of a heartbeat sent before the freeze: still out.
  lease_.Renewed(sent + absl::Seconds(1), 7);
  Settle();
  EXPECT_EQ(recorder_.ActionCount(), 1u);
  // A fresh answer that names another generation (or none): stays frozen.
  lease_.Renewed(clock_.Now(), 0);
  Settle();
  lease_.Renewed(clock_.Now(), 8);
  Settle();
  EXPECT_EQ(recorder_.ActionCount(), 1u);
  EXPECT_TRUE(lease_.frozen());
  // A fresh answer naming generation 7: thawed, current again.
  lease_.Renewed(clock_.Now(), 7);
  ASSERT_TRUE(recorder_.AwaitActions(2));
  {
    absl::MutexLock lock(&recorder_.mu);
    EXPECT_EQ(recorder_.freezes, (std::vector<bool>{true, false}));
    EXPECT_EQ(recorder_.expired.size(), 1u);
  }
  EXPECT_FALSE(lease_.frozen());
  EXPECT_NE(File().find("\"current\": true"), std::string::npos) << File();
  // And the lease is enforced again.
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(recorder_.AwaitActions(3));
  absl::MutexLock lock(&recorder_.mu);
  auto expired_twice = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(recorder_.mu) {
    return recorder_.expired.size() >= 2;
  };
  recorder_.mu.AwaitWithTimeout(absl::Condition(&expired_twice), absl::Seconds(10));
  EXPECT_EQ(recorder_.expired, (std::vector<int64_t>{7, 7}));
}

// AwaitValid in a thread of its own; `result` once it returns.
struct AwaitValidCall {
  AwaitValidCall(WorkerLease& lease, absl::Duration bound)
      : thread([this, &lease, bound] {
          result = lease.AwaitValid(bound);
          returned.Notify();
        }) {}
  ~AwaitValidCall() { thread.join(); }
  bool result = false;
  absl::Notification returned;
  std::thread thread;
};

TEST_F(WorkerLeaseTest, AwaitValid_ReturnsWhenARenewalMakesTheLeaseValid) {
  lease_.Configure(absl::Seconds(2));
  AwaitValidCall call(lease_, absl::Minutes(1));
  Settle();
  EXPECT_FALSE(call.returned.HasBeenNotified()) << "no renewal yet";
  lease_.Renewed(clock_.Now(), 1);
  ASSERT_TRUE(call.returned.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(call.result);
}

TEST_F(WorkerLeaseTest, AwaitValid_GivesUpAfterItsBoundOnTheLeasesClock) {
  lease_.Configure(absl::Seconds(2));
  lease_.Renewed(clock_.Now() - absl::Seconds(5), 1);  // ran out 3 s ago
  AwaitValidCall call(lease_, absl::Minutes(1));
  Settle();
  EXPECT_FALSE(call.returned.HasBeenNotified()) << "gave up before its bound";
  clock_.Advance(absl::Minutes(1));
  ASSERT_TRUE(call.returned.WaitForNotificationWithTimeout(absl::Seconds(10)))
      << "the bound is on the lease's clock";
  EXPECT_FALSE(call.result);
}

TEST_F(WorkerLeaseTest, FrozenThenStopping_NeverThawed) {
  lease_.Configure(absl::Seconds(2));
  lease_.Renewed(clock_.Now(), 3);
  lease_.Arm(3);
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(recorder_.AwaitActions(1));
  lease_.Stopping();  // the agent kills them
  lease_.Renewed(clock_.Now(), 3);
  Settle();
  EXPECT_EQ(recorder_.ActionCount(), 1u);
  lease_.Disarm();
  clock_.Advance(absl::Seconds(5));
  Settle();
  EXPECT_EQ(recorder_.ActionCount(), 1u);
  EXPECT_FALSE(lease_.frozen());
}

// Workers being stopped (SIGTERM handlers running) are frozen too when the
// lease runs out: a handler must not outlive the lease.
TEST_F(WorkerLeaseTest, RunsOutWhileStopping_FreezesThem) {
  lease_.Configure(absl::Seconds(2));
  lease_.Renewed(clock_.Now(), 3);
  lease_.Arm(3);
  lease_.Stopping();
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(recorder_.AwaitActions(1));
  absl::MutexLock lock(&recorder_.mu);
  EXPECT_EQ(recorder_.freezes, std::vector<bool>{true});
}

TEST_F(WorkerLeaseTest, RenewalsKeepWorkersRunningAndUnarmedLeasesNeverFire) {
  lease_.Configure(absl::Seconds(2));
  lease_.Renewed(clock_.Now(), 0);
  clock_.Advance(absl::Seconds(10));  // no workers: nothing to stop
  Settle();
  lease_.Renewed(clock_.Now(), 4);
  lease_.Arm(4);
  for (int i = 0; i < 20; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    lease_.Renewed(clock_.Now(), 4);
  }
  Settle();
  EXPECT_EQ(recorder_.ActionCount(), 0u);
}

TEST_F(WorkerLeaseTest, WithoutAGrantedLeaseNothingExpires) {
  lease_.Configure(absl::ZeroDuration());
  lease_.Arm(1);
  clock_.Advance(absl::Hours(1));
  Settle();
  EXPECT_EQ(recorder_.ActionCount(), 0u);
  EXPECT_EQ(lease_.expiry(), absl::InfiniteFuture());
  EXPECT_NE(File().find("\"valid_until_monotonic\": null"), std::string::npos) << File();
}

TEST_F(WorkerLeaseTest, TheFileSaysCurrentOnlyWhileTheCoordinatorRunsThisGeneration) {
  lease_.Configure(absl::Seconds(2));
  lease_.Renewed(clock_.Now(), 5);
  lease_.Arm(5);
  const std::string expected_until =
      std::to_string(absl::ToInt64Seconds(clock_.Now() + absl::Seconds(2) - absl::UnixEpoch()));
  EXPECT_NE(File().find("{\"generation\": 5, \"current\": true, \"valid_until_monotonic\": " +
                        expected_until + "."),
            std::string::npos)
      << File();
  lease_.Renewed(clock_.Now(), 0);  // a restart is under way
  EXPECT_NE(File().find("\"current\": false"), std::string::npos) << File();
  lease_.Renewed(clock_.Now(), 5);
  EXPECT_NE(File().find("\"current\": true"), std::string::npos) << File();
  lease_.Stopping();
  EXPECT_NE(File().find("\"current\": false"), std::string::npos) << File();
  lease_.Disarm();
  EXPECT_NE(File().find("{\"generation\": 0, \"current\": false"), std::string::npos) << File();
}

}  // namespace
}  // namespace ddp::client
