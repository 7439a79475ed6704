// kill -9 test of the real coordinator: concurrent durable puts and adds plus a
// resuming watcher, SIGKILL at a random moment, restart on the same data dir,
// then FindViolations (crash_history.h) over everything observed so far.
// DDP_CRASH_SEED=N reproduces a run's kill times.

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/failpoint.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/crash/coordinator_process.h"
#include "tests/crash/crash_history.h"
#include "tests/crash/test_channel.h"

namespace ddp::testing {
namespace {

constexpr int kCycles = 20;
constexpr int kClients = 16;
constexpr char kNamespace[] = "crash";
constexpr char kCounterKey[] = "counter";
constexpr absl::Duration kCallDeadline = absl::Seconds(2);
constexpr absl::Duration kMinBackoff = absl::Milliseconds(5);
constexpr absl::Duration kMaxBackoff = absl::Milliseconds(100);
constexpr absl::Duration kRunAfterRestart = absl::Milliseconds(100);
constexpr absl::Duration kCatchUpBound = absl::Seconds(20);

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool Retryable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

class Recorder {
 public:
  void Ack(AckedWrite write) {
    absl::MutexLock lock(&mu_);
    history_.acked.push_back(std::move(write));
  }
  void AttemptAdd() {
    absl::MutexLock lock(&mu_);
    ++history_.attempted_adds;
  }
  void Watched(std::string key, int64_t revision) {
    absl::MutexLock lock(&mu_);
    history_.watched.push_back({std::move(key), revision});
    last_watched_ = std::max(last_watched_, revision);
  }
  void Crashed(Crash crash) {
    absl::MutexLock lock(&mu_);
    history_.crashes.push_back(crash);
  }
  void Error(std::string line) {
    absl::MutexLock lock(&mu_);
    errors_.push_back(std::move(line));
  }
  bool WaitWatchedAtLeast(int64_t revision, absl::Duration bound) {
    absl::MutexLock lock(&mu_);
    auto reached = [&] { return last_watched_ >= revision; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), bound);
  }
  CrashHistory Snapshot() {
    absl::MutexLock lock(&mu_);
    return history_;
  }
  std::vector<std::string> Errors() {
    absl::MutexLock lock(&mu_);
    return errors_;
  }
  int64_t AckedAfter(int64_t ns) {
    absl::MutexLock lock(&mu_);
    int64_t count = 0;
    for (const AckedWrite& write : history_.acked) count += write.started_ns > ns;
    return count;
  }

 private:
  absl::Mutex mu_;
  CrashHistory history_ ABSL_GUARDED_BY(mu_);
  int64_t last_watched_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
};

// One client thread: put, put, add, ... each retried on UNAVAILABLE with
// backoff until acknowledged or `stop`. Keys are unique per (client, seq).
void RunClient(int id, const std::string& address, int64_t& next_seq, Recorder& recorder,
               const std::atomic<bool>& stop) {
  auto stub = v1::KeyValueService::NewStub(MakeFastReconnectChannel(address, id));
  std::mt19937 jitter(id);
  for (int op = 0; !stop.load(); ++op) {
    const bool is_add = op % 3 == 2;
    const int64_t seq = next_seq;
    AckedWrite write;
    write.client = id;
    write.is_add = is_add;
    write.key = is_add ? kCounterKey : absl::StrCat("put/", id, "/", seq);
    write.value = is_add ? "" : absl::StrCat("v-", id, "-", seq * 7919 + 1);
    absl::Duration backoff = kMinBackoff;
    while (!stop.load()) {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + kCallDeadline));
      grpc::Status status;
      write.started_ns = NowNs();
      if (is_add) {
        recorder.AttemptAdd();
        v1::AddRequest request;
        request.set_namespace_(kNamespace);
        request.set_key(write.key);
        request.set_delta(1);
        v1::AddResponse response;
        status = stub->Add(&context, request, &response);
        write.revision = response.revision();
      } else {
        v1::PutRequest request;
        request.set_namespace_(kNamespace);
        request.set_key(write.key);
        request.set_value(write.value);
        v1::PutResponse response;
        status = stub->Put(&context, request, &response);
        write.revision = response.revision();
      }
      write.finished_ns = NowNs();
      if (status.ok()) {
        recorder.Ack(write);
        if (!is_add) ++next_seq;
        break;
      }
      if (!Retryable(status)) {
        recorder.Error(
            absl::StrCat("client ", id, ": ", status.error_code(), " ", status.error_message()));
        return;
      }
      absl::SleepFor(backoff * (0.5 + (jitter() % 1000) / 1000.0));
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }
}

// Watches the whole namespace; after a broken stream, resumes from the last
// event's revision + 1.
class ResumingWatcher {
 public:
  ResumingWatcher(const std::string& address, Recorder& recorder)
      : stub_(v1::KeyValueService::NewStub(MakeFastReconnectChannel(address, 1000))),
        recorder_(recorder),
        thread_([this] { Run(); }) {}
  ~ResumingWatcher() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      if (context_ != nullptr) context_->TryCancel();
    }
    thread_.join();
  }
  int resumes() const { return resumes_.load(); }

 private:
  void Run() {
    int64_t last = 0;
    while (true) {
      grpc::ClientContext context;
      context.set_wait_for_ready(true);
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
        context_ = &context;
      }
      v1::WatchRequest request;
      request.set_namespace_(kNamespace);
      request.set_start_revision(last + 1);
      auto reader = stub_->Watch(&context, request);
      v1::WatchResponse response;
      while (reader->Read(&response)) {
        for (const v1::Event& event : response.events()) {
          last = event.kv().mod_revision();
          recorder_.Watched(event.kv().key(), last);
        }
      }
      grpc::Status status = reader->Finish();
      absl::MutexLock lock(&mu_);
      context_ = nullptr;
      if (stopping_) return;
      if (!Retryable(status) && status.error_code() != grpc::StatusCode::CANCELLED) {
        recorder_.Error(absl::StrCat("watch: ", status.error_code(), " ", status.error_message()));
        return;
      }
      ++resumes_;
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), kMinBackoff);
    }
  }

  std::unique_ptr<v1::KeyValueService::Stub> stub_;
  Recorder& recorder_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::atomic<int> resumes_{0};
  std::thread thread_;
};

int64_t StatusRevision(v1::KeyValueService::Stub& stub) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kCallDeadline));
    context.set_wait_for_ready(true);
    v1::StatusResponse response;
    if (stub.Status(&context, v1::StatusRequest(), &response).ok()) {
      return response.revision();
    }
    absl::SleepFor(kMinBackoff);
  }
  return -1;
}

FinalState ReadState(v1::KeyValueService::Stub& stub) {
  FinalState state;
  v1::RangeRequest request;
  request.set_namespace_(kNamespace);
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kCallDeadline * 5));
    v1::RangeResponse response;
    grpc::Status status = stub.Range(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    if (!status.ok()) break;
    for (const v1::KeyValue& kv : response.kvs()) {
      state.kvs[kv.key()] = kv.value();
    }
    if (!response.more()) break;
    request.set_start_after(response.next_start_after());
  }
  auto it = state.kvs.find(kCounterKey);
  if (it != state.kvs.end()) {
    EXPECT_TRUE(absl::SimpleAtoi(it->second, &state.counter));
  }
  return state;
}

struct RunResult {
  std::vector<std::string> violations;
  int64_t acked_after_restarts = 0;
  int64_t acked = 0;
  int watch_resumes = 0;
};

// Runs `cycles` crash cycles: kill -9 at a random moment, or, with
// `failpoint`, the coordinator crashing itself at that named step
// (common/failpoint.h) on a random hit. With `lose_one_write`, deletes one
// acknowledged key on the server before the check (the checker must notice).
RunResult RunCrashCycles(int cycles, bool lose_one_write, const std::string& failpoint = "") {
  RunResult result;
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string work =
      absl::StrCat(dir, "/", lose_one_write ? "lose" : (failpoint.empty() ? "crash" : failpoint));
  CoordinatorProcess process(
      CoordinatorProcessOptions{CoordinatorBinaryFromRunfiles(), work + "-data", dir});
  uint32_t seed = std::random_device()();
  if (const char* env = std::getenv("DDP_CRASH_SEED")) {
    EXPECT_TRUE(absl::SimpleAtoi(env, &seed));
  }
  std::cerr << "crash test seed " << seed << " (DDP_CRASH_SEED)\n";
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> kill_after_ms(50, 400);
  std::uniform_int_distribution<int> crash_at_hit(5, 60);
  // Armed for the start that opens each cycle; the restart after the crash is
  // clean (the check runs on it).
  auto arm = [&](bool armed) {
    if (failpoint.empty()) return;
    process.set_extra_env(armed
                              ? std::vector<std::string>{absl::StrCat(
                                    "DDP_FAILPOINTS=", failpoint, "=crash@", crash_at_hit(random))}
                              : std::vector<std::string>{});
  };
  arm(true);
  absl::Status started = process.Start();
  EXPECT_TRUE(started.ok()) << started;
  if (!started.ok()) return result;
  const std::string address = process.address();
  auto control = v1::KeyValueService::NewStub(MakeFastReconnectChannel(address, 2000));

  Recorder recorder;
  ResumingWatcher watcher(address, recorder);
  std::vector<int64_t> next_seq(kClients, 0);
  for (int cycle = 0; cycle < cycles; ++cycle) {
    if (!failpoint.empty() && cycle > 0) {
      // Armed again for this cycle's crash (the last restart was clean, so
      // the check after it could run).
      process.Terminate();
      arm(true);
      started = process.Start();
      EXPECT_TRUE(started.ok()) << "arming restart " << cycle << ": " << started;
      if (!started.ok()) break;
    }
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int id = 0; id < kClients; ++id) {
      clients.emplace_back(RunClient, id, address, std::ref(next_seq[id]), std::ref(recorder),
                           std::cref(stop));
    }
    Crash crash;
    if (failpoint.empty()) {
      absl::SleepFor(absl::Milliseconds(kill_after_ms(random)));
      crash.killed_ns = NowNs();
      process.Kill9();
    } else {
      // It crashes itself at the failpoint under the clients' load.
      std::optional<int> exited;
      const absl::Time deadline = absl::Now() + absl::Seconds(60);
      while (!(exited = process.ExitedWith()) && absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(5));
      }
      crash.killed_ns = NowNs();
      EXPECT_EQ(exited, kFailpointExitCode) << "cycle " << cycle << ": the coordinator did not "
                                            << "crash at " << failpoint;
      if (!exited) process.Kill9();
    }
    arm(false);
    started = process.Start();
    EXPECT_TRUE(started.ok()) << "restart " << cycle << ": " << started;
    crash.restarted_ns = NowNs();
    crash.status_revision_after = StatusRevision(*control);
    recorder.Crashed(crash);
    absl::SleepFor(kRunAfterRestart);
    stop = true;
    for (std::thread& client : clients) client.join();
    if (!started.ok()) break;

    if (lose_one_write) {
      const CrashHistory snapshot = recorder.Snapshot();
      for (const AckedWrite& write : snapshot.acked) {
        if (write.is_add) continue;
        grpc::ClientContext context;
        v1::DeleteRequest request;
        request.set_namespace_(kNamespace);
        request.set_key(write.key);
        v1::DeleteResponse response;
        EXPECT_TRUE(control->Delete(&context, request, &response).ok());
        break;
      }
    }
    const int64_t revision = StatusRevision(*control);
    const FinalState state = ReadState(*control);
    EXPECT_TRUE(recorder.WaitWatchedAtLeast(revision, kCatchUpBound))
        << "watcher did not reach revision " << revision;
    CrashHistory history = recorder.Snapshot();
    history.counter_key = kCounterKey;
    result.violations = FindViolations(history, state);
    for (const std::string& error : recorder.Errors()) {
      result.violations.push_back(error);
    }
    result.acked = history.acked.size();
    std::cerr << "cycle " << cycle << ": " << history.acked.size()
              << " writes acknowledged so far, revision " << revision << ", counter "
              << state.counter << "\n";
    if (!result.violations.empty()) break;
  }
  for (const Crash& crash : recorder.Snapshot().crashes) {
    result.acked_after_restarts += recorder.AckedAfter(crash.restarted_ns) > 0;
  }
  result.watch_resumes = watcher.resumes();
  return result;
}

TEST(CrashTest, KillNineCycles_NoAcknowledgedWriteLostNoWatchGap) {
  const RunResult result = RunCrashCycles(kCycles, /*lose_one_write=*/false);
  EXPECT_TRUE(result.violations.empty()) << absl::StrJoin(result.violations, "\n");
  // The test proves something only if writes happened around every crash.
  EXPECT_GT(result.acked, kCycles * kClients);
  EXPECT_EQ(result.acked_after_restarts, kCycles);
  EXPECT_GE(result.watch_resumes, kCycles);
}

// Issue 24, point 6: a crash exactly at each durability step of the commit
// loop (etcd's raftBeforeSave / raftAfterSave): before the batch is saved
// (nothing of it may appear), after it is saved but before any reply left (it
// may appear, unacknowledged), and between two batches' deliveries (the later
// batch durable, its replies unsent). The same checker as the kill -9 cycles:
// every acknowledged write present, revisions monotonic across the crash, the
// resumed watch gap-free and in order.
class FailpointCrashTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FailpointCrashTest, CrashAtStep_NoAcknowledgedWriteLostNoWatchGap) {
  constexpr int kFailpointCycles = 3;
  const RunResult result = RunCrashCycles(kFailpointCycles, /*lose_one_write=*/false, GetParam());
  EXPECT_TRUE(result.violations.empty()) << absl::StrJoin(result.violations, "\n");
  EXPECT_GT(result.acked, kFailpointCycles * kClients);
  EXPECT_EQ(result.acked_after_restarts, kFailpointCycles);
}

INSTANTIATE_TEST_SUITE_P(EveryStep, FailpointCrashTest,
                         ::testing::Values("commit_before_save", "commit_after_save",
                                           "deliver_between_batches"));

TEST(CrashTest, AcknowledgedKeyDeletedBehindTheTest_IsReported) {
  const RunResult result = RunCrashCycles(1, /*lose_one_write=*/true);
  ASSERT_FALSE(result.violations.empty());
  EXPECT_NE(result.violations[0].find("is missing"), std::string::npos) << result.violations[0];
}

}  // namespace
}  // namespace ddp::testing
