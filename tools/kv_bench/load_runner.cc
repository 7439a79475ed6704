#include "tools/kv_bench/load_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"

namespace ddp::kv_bench {
namespace {

using SteadyClock = std::chrono::steady_clock;
using SteadyTime = SteadyClock::time_point;

class ClosedLoop final : public OperationDone {
 public:
  ClosedLoop(const LoadOptions& options, const AsyncOperation& start)
      : options_(options), start_(start), clients_(options.clients) {}

  LoadResult Run();
  void Done(int client, absl::string_view error) override;

 private:
  // Owned by whichever thread runs the client's current operation; handed
  // over through the operation (gRPC orders a call's start before its end).
  struct Client {
    int64_t seq = 0;
    SteadyTime begin;
    std::vector<int64_t> latencies_ns;
    int64_t errors = 0;
    std::string first_error;
  };
  // One Issue() under way on this thread. An operation that completes inline
  // (inside `start_`) marks its frame instead of recursing, so a run of
  // immediate failures loops instead of growing the stack.
  struct IssueFrame {
    const Client* client;
    bool completed_inline;
    IssueFrame* outer;
  };

  // Starts `client`'s next operations until one is asynchronous.
  void Issue(int client);

  static thread_local IssueFrame* frame_;

  const LoadOptions& options_;
  const AsyncOperation& start_;
  std::vector<Client> clients_;
  SteadyTime measure_from_;
  SteadyTime end_;
  absl::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
};

thread_local ClosedLoop::IssueFrame* ClosedLoop::frame_ = nullptr;

void ClosedLoop::Issue(int client) {
  Client& c = clients_[client];
  IssueFrame frame{&c, false, frame_};
  frame_ = &frame;
  do {
    frame.completed_inline = false;
    const SteadyTime now = SteadyClock::now();
    if (now >= end_) {  // this client is done
      absl::MutexLock lock(&mu_);
      --active_;
      break;
    }
    c.begin = now;
    start_(client, c.seq++, *this);
    // Unless it completed inline, `c` may now belong to another thread.
  } while (frame.completed_inline);
  frame_ = frame.outer;
}

void ClosedLoop::Done(int client, absl::string_view error) {
  Client& c = clients_[client];
  if (c.begin >= measure_from_) {
    if (!error.empty()) {
      if (c.errors++ == 0) c.first_error = std::string(error);
    } else {
      c.latencies_ns.push_back(
          std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - c.begin)
              .count());
    }
  }
  for (IssueFrame* f = frame_; f != nullptr; f = f->outer) {
    if (f->client == &c) {
      f->completed_inline = true;  // its Issue loop starts the next one
      return;
    }
  }
  Issue(client);
}

LoadResult ClosedLoop::Run() {
  const SteadyTime start = SteadyClock::now();
  measure_from_ = start + absl::ToChronoNanoseconds(options_.warmup);
  end_ = measure_from_ + absl::ToChronoNanoseconds(options_.duration);
  {
    absl::MutexLock lock(&mu_);
    active_ = options_.clients;
  }
  for (int client = 0; client < options_.clients; ++client) Issue(client);
  std::this_thread::sleep_until(measure_from_);
  if (options_.on_window_start) options_.on_window_start();
  std::this_thread::sleep_until(end_);
  if (options_.on_window_end) options_.on_window_end();
  LoadResult result;
  {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(
                                  +[](int* active) { return *active == 0; }, &active_),
                              options_.drain_timeout)) {
      result.stuck_clients = active_;
      return result;  // the caller keeps this object alive
    }
  }
  std::vector<absl::Duration> all;
  for (const Client& c : clients_) {
    for (int64_t ns : c.latencies_ns) all.push_back(absl::Nanoseconds(ns));
    result.errors += c.errors;
    if (result.first_error.empty()) result.first_error = c.first_error;
  }
  result.ops = static_cast<int64_t>(all.size());
  result.ops_per_second = result.ops / absl::ToDoubleSeconds(options_.duration);
  result.p50 = Quantile(all, 0.50);
  result.p99 = Quantile(all, 0.99);
  result.max = Quantile(all, 1.0);
  return result;
}

}  // namespace

absl::Duration Quantile(std::vector<absl::Duration>& samples, double q) {
  if (samples.empty()) return absl::ZeroDuration();
  std::sort(samples.begin(), samples.end());
  const size_t index = std::min(
      samples.size() - 1, static_cast<size_t>(std::ceil(q * samples.size())) - (q > 0 ? 1 : 0));
  return samples[index];
}

std::string FormatLatency(absl::Duration d) {
  const double us = absl::ToDoubleMicroseconds(d);
  if (us < 1000) return absl::StrFormat("%.0f us", us);
  return absl::StrFormat("%.2f ms", us / 1000);
}

LoadResult RunClosedLoop(const LoadOptions& options, const AsyncOperation& start) {
  auto loop = std::make_unique<ClosedLoop>(options, start);
  LoadResult result = loop->Run();
  // Operations still in flight will call Done on it: leak it rather than
  // let them touch freed memory (the process is about to report and exit).
  if (result.stuck_clients > 0) loop.release();
  return result;
}

}  // namespace ddp::kv_bench
