#ifndef DDP_COORDINATOR_RENDEZVOUS_REGISTRY_TEST_UTIL_H_
#define DDP_COORDINATOR_RENDEZVOUS_REGISTRY_TEST_UTIL_H_

// JobRegistry tests without the commit loop.

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "coordinator/rendezvous/job_registry.h"

namespace ddp::rendezvous::testing {

// Runs `call` (a scheduler operation, which answers only once its changes are
// durable) on a thread while this thread writes them (PersistPending), as the
// commit loop would; returns what `call` returned.
template <typename Call>
auto WhileWriting(JobRegistry& registry, Call call) -> decltype(call()) {
  std::atomic<bool> done{false};
  decltype(call()) result;
  std::thread caller([&] {
    result = call();
    done = true;
  });
  while (!done) {
    (void)registry.PersistPending();
    absl::SleepFor(absl::Milliseconds(1));
  }
  caller.join();
  return result;
}

}  // namespace ddp::rendezvous::testing

#endif  // DDP_COORDINATOR_RENDEZVOUS_REGISTRY_TEST_UTIL_H_
