#include "coordinator/commit/commit_loop.h"

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace ddp::commit {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);

// Records every commit; can hold a commit until released, or fail them.
class RecordingStore final : public StateStore {
 public:
  absl::Status CommitState(const StateBatch& batch) override {
    absl::MutexLock lock(&mu);
    ++entered;
    mu.Await(absl::Condition(
        +[](RecordingStore* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return !s->hold; }, this));
    if (!fail_with.ok()) return fail_with;
    if (clock != nullptr) clock->Advance(takes);
    Commit one;
    one.kv_revision = batch.kv ? batch.kv->revision : 0;
    for (const auto& changes : batch.jobs) one.jobs.push_back(changes.job_id);
    commits.push_back(one);
    return absl::OkStatus();
  }
  absl::StatusOr<kv::PersistedKvState> Load() override { return kv::PersistedKvState{}; }
  absl::StatusOr<std::vector<kv::Event>> ReadEvents(const std::string&, const std::string&,
                                                    kv::Revision, size_t) override {
    return std::vector<kv::Event>{};
  }
  absl::Status Compact(kv::Revision) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<rendezvous::JobSnapshot>> LoadAll() const override {
    return std::vector<rendezvous::JobSnapshot>{};
  }
  absl::StatusOr<rendezvous::JobEventCounts> LoadEventCounts() const override {
    return rendezvous::JobEventCounts{};
  }
  absl::StatusOr<std::vector<v1::Node>> LoadNodes() const override {
    return std::vector<v1::Node>{};
  }
  absl::StatusOr<std::optional<v1::QuarantinePolicy>> LoadQuarantinePolicy() const override {
    return std::nullopt;
  }

  struct Commit {
    kv::Revision kv_revision = 0;
    std::vector<std::string> jobs;
  };
  absl::Mutex mu;
  std::vector<Commit> commits ABSL_GUARDED_BY(mu);
  int entered ABSL_GUARDED_BY(mu) = 0;
  bool hold ABSL_GUARDED_BY(mu) = false;
  absl::Status fail_with ABSL_GUARDED_BY(mu);
  // Moved by `takes` in each commit, when set.
  FakeClock* clock = nullptr;
  absl::Duration takes;
};

// A participant with a queue of its own: KV revisions or job ids.
class QueueParticipant final : public CommitParticipant {
 public:
  QueueParticipant(bool kv, std::vector<std::string>* log, absl::Mutex* log_mu)
      : kv_(kv), log_(log), log_mu_(log_mu) {}

  void Queue(const std::string& item) {
    absl::MutexLock lock(&mu_);
    queued_.push_back(item);
  }
  bool Prepare(StateBatch& batch) override {
    absl::MutexLock lock(&mu_);
    taken_.swap(queued_);
    queued_.clear();
    if (taken_.empty()) return false;
    if (kv_) {
      batch.kv.emplace();
      batch.kv->revision = static_cast<kv::Revision>(std::stoll(taken_.back()));
    } else {
      for (const std::string& id : taken_) {
        rendezvous::JobChanges changes;
        changes.job_id = id;
        batch.jobs.push_back(changes);
      }
    }
    return false;
  }
  void Finish(const absl::Status& status, StateBatch&, Sends& sends) override {
    absl::MutexLock lock(&mu_);
    if (taken_.empty()) return;
    if (!status.ok()) {  // kept: taken again by the next pass
      for (std::string& item : queued_) taken_.push_back(std::move(item));
      queued_.swap(taken_);
      taken_.clear();
      ++failures;
      return;
    }
    for (const std::string& item : taken_) {
      sends.push_back([this, item] {
        absl::MutexLock lock(log_mu_);
        log_->push_back((kv_ ? "kv:" : "job:") + item);
      });
    }
    taken_.clear();
  }
  void Tick() override {
    absl::MutexLock lock(&mu_);
    ++ticks;
  }

  absl::Mutex mu_;
  int failures ABSL_GUARDED_BY(mu_) = 0;
  int ticks ABSL_GUARDED_BY(mu_) = 0;

 private:
  const bool kv_;
  std::vector<std::string>* log_;
  absl::Mutex* log_mu_;
  std::vector<std::string> queued_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> taken_ ABSL_GUARDED_BY(mu_);
};

struct Loop {
  explicit Loop(CommitLoopOptions options = NoTicker())
      : kv(true, &log, &log_mu), jobs(false, &log, &log_mu), loop(store, options) {
    loop.Add(&kv);
    loop.Add(&jobs);
    loop.Start();
  }
  static CommitLoopOptions NoTicker() {
    CommitLoopOptions options;
    options.tick_interval = absl::ZeroDuration();
    options.retry_interval = absl::Milliseconds(1);
    return options;
  }
  // Returns once the store is inside a CommitState (held there by `hold`).
  void WaitUntilACommitStarted() {
    absl::MutexLock lock(&store.mu);
    store.mu.AwaitWithTimeout(
        absl::Condition(
            +[](RecordingStore* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return s->entered > 0; },
            &store),
        kWait);
  }
  std::vector<std::string> Log() {
    absl::MutexLock lock(&log_mu);
    return log;
  }
  RecordingStore store;
  absl::Mutex log_mu;
  std::vector<std::string> log ABSL_GUARDED_BY(log_mu);
  QueueParticipant kv;
  QueueParticipant jobs;
  CommitLoop loop;
};

TEST(CommitLoopTest, KvAndJobChangesQueuedTogether_OneCommitHoldsBoth) {
  Loop t;
  {
    absl::MutexLock lock(&t.store.mu);
    t.store.hold = true;  // nothing commits until both are queued
  }
  t.kv.Queue("1");
  t.jobs.Queue("a");
  t.loop.Notify();
  t.WaitUntilACommitStarted();
  {
    absl::MutexLock lock(&t.store.mu);
    t.store.hold = false;
  }
  t.loop.Flush();
  absl::MutexLock lock(&t.store.mu);
  ASSERT_EQ(t.store.commits.size(), 1u);
  EXPECT_EQ(t.store.commits[0].kv_revision, 1);
  EXPECT_EQ(t.store.commits[0].jobs, std::vector<std::string>{"a"});
}

TEST(CommitLoopTest, SendsWaitForTheirCommit_ThenLeaveInCommitOrder) {
  Loop t;
  {
    absl::MutexLock lock(&t.store.mu);
    t.store.hold = true;
  }
  t.kv.Queue("1");
  t.loop.Notify();
  t.WaitUntilACommitStarted();
  // The commit is in progress: its send must not have left.
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_TRUE(t.Log().empty());
  t.jobs.Queue("a");  // arrives during the commit: the next batch
  t.loop.Notify();
  {
    absl::MutexLock lock(&t.store.mu);
    t.store.hold = false;
  }
  t.loop.Flush();
  t.kv.Queue("2");
  t.loop.Notify();
  t.loop.Flush();
  EXPECT_EQ(t.Log(), (std::vector<std::string>{"kv:1", "job:a", "kv:2"}));
}

TEST(CommitLoopTest, FailedCommit_NothingSent_KeptChangesRetried) {
  Loop t;
  {
    absl::MutexLock lock(&t.store.mu);
    t.store.fail_with = absl::UnavailableError("disk busy");
  }
  t.jobs.Queue("a");
  t.loop.Notify();
  {
    absl::MutexLock lock(&t.jobs.mu_);
    t.jobs.mu_.AwaitWithTimeout(absl::Condition(
                                    +[](QueueParticipant* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
                                      return p->failures >= 2;  // tried, and retried
                                    },
                                    &t.jobs),
                                kWait);
  }
  EXPECT_TRUE(t.Log().empty());
  {
    absl::MutexLock lock(&t.store.mu);
    t.store.fail_with = absl::OkStatus();
  }
  t.loop.Flush();
  for (int i = 0; i < 1000 && t.Log().empty(); ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(t.Log(), std::vector<std::string>{"job:a"});
  absl::MutexLock lock(&t.store.mu);
  EXPECT_EQ(t.store.commits.size(), 1u);
}

TEST(CommitLoopTest, NothingToPersist_NoCommit) {
  Loop t;
  t.loop.Notify();
  t.loop.Flush();
  absl::MutexLock lock(&t.store.mu);
  EXPECT_EQ(t.store.entered, 0);
}

TEST(CommitLoopTest, Shutdown_CommitsAndSendsWhatIsQueued) {
  auto t = std::make_unique<Loop>();
  t->kv.Queue("1");
  t->jobs.Queue("a");
  t->loop.Notify();
  t->loop.Shutdown();
  EXPECT_EQ(t->Log(), (std::vector<std::string>{"kv:1", "job:a"}));
  t->loop.Shutdown();  // idempotent
  t->loop.Flush();     // returns at once once stopped
}

TEST(CommitLoopTest, Ticker_TicksEveryParticipant) {
  CommitLoopOptions options;
  options.tick_interval = absl::Milliseconds(1);
  Loop t(options);
  for (int i = 0; i < 2000; ++i) {
    {
      absl::MutexLock a(&t.kv.mu_);
      absl::MutexLock b(&t.jobs.mu_);
      if (t.kv.ticks >= 3 && t.jobs.ticks >= 3) break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  absl::MutexLock a(&t.kv.mu_);
  absl::MutexLock b(&t.jobs.mu_);
  EXPECT_GE(t.kv.ticks, 3);
  EXPECT_GE(t.jobs.ticks, 3);
}

TEST(CommitLoopTest, OnCommit_TimesTheCommitOnTheInjectedClock) {
  FakeClock clock;
  absl::Mutex mu;
  std::vector<absl::Duration> took;
  CommitLoopOptions options = Loop::NoTicker();
  options.clock = &clock;
  options.on_commit = [&](const StateBatch&, absl::Duration d) {
    absl::MutexLock lock(&mu);
    took.push_back(d);
  };
  RecordingStore store;
  store.clock = &clock;
  store.takes = absl::Milliseconds(250);
  absl::Mutex log_mu;
  std::vector<std::string> log;
  QueueParticipant kv(true, &log, &log_mu);
  CommitLoop loop(store, options);
  loop.Add(&kv);
  loop.Start();
  kv.Queue("1");
  loop.Notify();
  loop.Flush();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(took, std::vector<absl::Duration>{absl::Milliseconds(250)});
}

}  // namespace
}  // namespace ddp::commit
