#include "client/agent/worker_lease.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"

namespace ddp::client {

WorkerLease::WorkerLease(const Clock& clock, Options options, SignalWorkers signal_workers,
                         Expired expired)
    : clock_(clock),
      options_(std::move(options)),
      signal_workers_(std::move(signal_workers)),
      expired_(std::move(expired)) {
  thread_ = std::thread([this] { Loop(); });
}

WorkerLease::~WorkerLease() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  thread_.join();
}

void WorkerLease::Configure(absl::Duration lease, absl::Duration kill_after) {
  absl::MutexLock lock(&mu_);
  lease_ = std::max(lease, absl::ZeroDuration());
  kill_after_ = std::max(kill_after, lease_);
  PublishLocked();
}

void WorkerLease::Renewed(absl::Time sent_at, int64_t running_generation) {
  absl::MutexLock lock(&mu_);
  // Acknowledgements arrive in order, but a Registered may answer a Register
  // sent before the last acknowledged heartbeat of the previous stream.
  renewed_from_ = std::max(renewed_from_, sent_at);
  const bool changed = running_generation_ != running_generation;
  running_generation_ = running_generation;
  if (armed_generation_ != 0 || changed) PublishLocked();
}

void WorkerLease::Arm(int64_t generation) {
  absl::MutexLock lock(&mu_);
  armed_generation_ = generation;
  // Its Assignment came from the coordinator once the generation ran.
  running_generation_ = generation;
  stopping_ = false;
  expired_fired_ = false;
  killed_ = false;
  kill_at_ = absl::InfiniteFuture();
  PublishLocked();
}

void WorkerLease::Stopping() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  PublishLocked();
}

void WorkerLease::Disarm() {
  absl::MutexLock lock(&mu_);
  armed_generation_ = 0;
  stopping_ = false;
  PublishLocked();
}

bool WorkerLease::AwaitValid(absl::Duration bound) {
  absl::MutexLock lock(&mu_);
  auto valid = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return lease_ <= absl::ZeroDuration() || clock_.Now() < ExpiryLocked();
  };
  // Renewed() releases the lock, which re-evaluates the condition; the
  // slices notice a FakeClock that moved.
  const absl::Time give_up = absl::Now() + bound;
  while (!valid() && absl::Now() < give_up) {
    mu_.AwaitWithTimeout(absl::Condition(&valid), std::min(options_.poll, give_up - absl::Now()));
  }
  return valid();
}

absl::Time WorkerLease::expiry() const {
  absl::MutexLock lock(&mu_);
  return ExpiryLocked();
}

absl::Time WorkerLease::ExpiryLocked() const {
  if (lease_ <= absl::ZeroDuration()) return absl::InfiniteFuture();
  return renewed_from_ + lease_;
}

bool WorkerLease::CurrentLocked() const {
  return armed_generation_ != 0 && !stopping_ && !expired_fired_ &&
         running_generation_ == armed_generation_ && clock_.Now() < ExpiryLocked();
}

void WorkerLease::PublishLocked() {
  if (options_.lease_file.empty()) return;
  const absl::Time expiry = ExpiryLocked();
  const std::string valid_until =
      expiry == absl::InfiniteFuture()
          ? "null"
          : absl::StrFormat("%.6f", absl::ToDoubleSeconds(expiry - absl::UnixEpoch()));
  const std::string text = absl::StrCat("{\"generation\": ", armed_generation_,
                                        ", \"current\": ", CurrentLocked() ? "true" : "false",
                                        ", \"valid_until_monotonic\": ", valid_until, "}\n");
  const std::string temporary = options_.lease_file + ".tmp";
  FILE* file = fopen(temporary.c_str(), "w");
  bool ok = file != nullptr;
  if (ok) {
    ok = fwrite(text.data(), 1, text.size(), file) == text.size();
    ok = (fclose(file) == 0) && ok;
  }
  ok = ok && rename(temporary.c_str(), options_.lease_file.c_str()) == 0;
  if (!ok && !publish_failed_) {
    publish_failed_ = true;
    DDP_LOG(WARNING) << "cannot write the lease file " << options_.lease_file << ": "
                     << std::strerror(errno) << " (workers that check it see no current lease)";
  }
}

void WorkerLease::Loop() {
  pthread_setname_np(pthread_self(), "worker-lease");
  while (true) {
    int signal = 0;
    int64_t expired_generation = 0;
    absl::Duration silent;
    {
      absl::MutexLock lock(&mu_);
      if (quit_) return;
      const absl::Time now = clock_.Now();
      const bool armed = armed_generation_ != 0;
      if (armed && !expired_fired_ && now >= ExpiryLocked()) {
        expired_fired_ = true;
        kill_at_ = renewed_from_ + kill_after_;
        signal = SIGTERM;
        expired_generation = armed_generation_;
        silent = now - renewed_from_;
        PublishLocked();
      } else if (armed && expired_fired_ && !killed_ && now >= kill_at_) {
        killed_ = true;
        signal = SIGKILL;
      }
      if (signal == 0) {
        absl::Time next = absl::InfiniteFuture();
        if (armed && !expired_fired_) next = ExpiryLocked();
        if (armed && expired_fired_ && !killed_) next = kill_at_;
        const absl::Duration wait = std::clamp(next - now, absl::Milliseconds(1), options_.poll);
        mu_.AwaitWithTimeout(absl::Condition(&quit_), wait);
        continue;
      }
    }
    if (signal == SIGTERM) {
      DDP_LOG(ERROR) << "lease of generation " << expired_generation << " ran out: no heartbeat "
                     << "acknowledged by the coordinator for " << absl::FormatDuration(silent)
                     << " (cut off, or the coordinator is down); stopping the workers so that "
                     << "they cannot run beside a generation formed without this node";
      signal_workers_(SIGTERM);
      expired_(expired_generation);
    } else {
      DDP_LOG(WARNING) << "workers still running at the end of the lease's grace: SIGKILL";
      signal_workers_(SIGKILL);
    }
  }
}

}  // namespace ddp::client
