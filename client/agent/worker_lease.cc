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

WorkerLease::WorkerLease(const Clock& clock, Options options, FreezeWorkers freeze_workers,
                         Expired expired)
    : clock_(clock),
      options_(std::move(options)),
      freeze_workers_(std::move(freeze_workers)),
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

void WorkerLease::Configure(absl::Duration lease) {
  absl::MutexLock lock(&mu_);
  lease_ = std::max(lease, absl::ZeroDuration());
  PublishLocked();
}

void WorkerLease::Renewed(absl::Time sent_at, int64_t running_generation) {
  absl::MutexLock lock(&mu_);
  // Acknowledgements arrive in order, but a Registered may answer a Register
  // sent before the last acknowledged heartbeat of the previous stream.
  renewed_from_ = std::max(renewed_from_, sent_at);
  const bool changed = running_generation_ != running_generation;
  running_generation_ = running_generation;
  if (frozen_) renewal_pending_ = true;  // the loop decides whether to thaw
  if (armed_generation_ != 0 || changed) PublishLocked();
}

void WorkerLease::Arm(int64_t generation) {
  absl::MutexLock lock(&mu_);
  armed_generation_ = generation;
  // Its Assignment came from the coordinator once the generation ran.
  running_generation_ = generation;
  stopping_ = false;
  frozen_ = false;
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
  frozen_ = false;
  PublishLocked();
}

bool WorkerLease::AwaitValid(absl::Duration bound) {
  absl::MutexLock lock(&mu_);
  auto valid = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return lease_ <= absl::ZeroDuration() || clock_.Now() < ExpiryLocked();
  };
  // Renewed() releases the lock, which re-evaluates the condition. The bound
  // is on clock_ too; Clock cannot wake a waiter, so the wait is real, in
  // slices of at most `poll` that notice a FakeClock that moved.
  const absl::Time give_up = clock_.Now() + bound;
  for (absl::Time now = clock_.Now(); !valid() && now < give_up; now = clock_.Now()) {
    mu_.AwaitWithTimeout(absl::Condition(&valid),
                         std::clamp(give_up - now, absl::Milliseconds(1), options_.poll));
  }
  return valid();
}

absl::Time WorkerLease::expiry() const {
  absl::MutexLock lock(&mu_);
  return ExpiryLocked();
}

bool WorkerLease::frozen() const {
  absl::MutexLock lock(&mu_);
  return frozen_;
}

absl::Time WorkerLease::ExpiryLocked() const {
  if (lease_ <= absl::ZeroDuration()) return absl::InfiniteFuture();
  return renewed_from_ + lease_;
}

bool WorkerLease::CurrentLocked() const {
  return armed_generation_ != 0 && !stopping_ && !frozen_ &&
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
    enum class Action { kNone, kFreeze, kThaw } action = Action::kNone;
    int64_t generation = 0;
    absl::Duration silent;
    {
      absl::MutexLock lock(&mu_);
      if (quit_) return;
      renewal_pending_ = false;
      const absl::Time now = clock_.Now();
      // Workers being stopped are frozen too when the lease runs out (their
      // SIGTERM handlers must not outlive it); they are thawed only while
      // they run on.
      const bool armed = armed_generation_ != 0;
      generation = armed_generation_;
      if (armed && !frozen_ && now >= ExpiryLocked()) {
        frozen_ = true;
        frozen_at_ = now;
        silent = now - renewed_from_;
        action = Action::kFreeze;
        PublishLocked();
      } else if (armed && frozen_ && !stopping_ && running_generation_ == armed_generation_ &&
                 now < ExpiryLocked()) {
        // The coordinator answered a heartbeat (or Register) sent after the
        // freeze began, naming this generation as the running one.
        frozen_ = false;
        silent = now - frozen_at_;
        action = Action::kThaw;
        PublishLocked();
      }
      if (action == Action::kNone) {
        absl::Time next = absl::InfiniteFuture();
        if (armed && !frozen_) next = ExpiryLocked();
        const absl::Duration wait = std::clamp(next - now, absl::Milliseconds(1), options_.poll);
        auto wake = [this]()
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return quit_ || renewal_pending_; };
        mu_.AwaitWithTimeout(absl::Condition(&wake), wait);
        continue;
      }
    }
    if (action == Action::kFreeze) {
      // Frozen first, logged after: SIGSTOP must not wait for a slow console.
      freeze_workers_(true);
      DDP_LOG(ERROR) << "lease of generation " << generation << " ran out: no heartbeat "
                     << "acknowledged by the coordinator for " << absl::FormatDuration(silent)
                     << " (the coordinator is down or restarting, or this node is cut off); "
                     << "froze the workers (SIGSTOP) until the coordinator confirms generation "
                     << generation << " is still current (then they go on where they stopped; "
                     << "if another generation began without this node they are killed)";
      expired_(generation);
    } else {
      freeze_workers_(false);
      DDP_LOG(WARNING) << "generation " << generation << " is still current: thawed the workers "
                       << "(SIGCONT) after " << absl::FormatDuration(silent) << " frozen";
    }
  }
}

}  // namespace ddp::client
