#ifndef DDP_COMMON_FAILPOINT_H_
#define DDP_COMMON_FAILPOINT_H_

// Named failpoints, as etcd's gofail: a test makes the process fail exactly at
// one step (between "persisted" and "sent", say) instead of at a random kill.
// Production code marks the steps:
//
//   DDP_FAILPOINT("commit_after_save");
//
// and a test arms them in the process's environment, read once at the first
// hit:
//
//   DDP_FAILPOINTS="commit_after_save=crash@25,deliver_between_batches=sleep(200)"
//
// Actions: `crash` ends the process at once with exit code kFailpointExitCode
// through _exit (no destructors, no buffered output flushed: what survives is
// what a kill -9 at that step would leave); `crash@N` on the N-th hit only;
// `sleep(MS)` pauses the calling thread. Unknown names in the variable are
// refused at the first hit (the process exits 2 naming them), so a typo never
// passes silently. Unarmed, a failpoint costs one relaxed atomic load.
//
// The failpoints of the tree (docs/operations.md, "Failpoints"):
//   commit_before_save     commit thread, a batch prepared, before the store commits it
//   commit_after_save      commit thread, the batch durable, before any reply leaves
//   deliver_between_batches  delivery thread, the earlier batches' replies sent, before this
//                          batch's (durable) replies and watch events leave
//   workers_spawned        ddp-client's worker monitor, every worker of a Start spawned,
//                          before Start returns
//
// Thread-safety: thread-safe.

#include <atomic>

namespace ddp {

inline constexpr int kFailpointExitCode = 86;

namespace failpoint_internal {
// -1: the environment not read yet; 0: nothing armed; 1: something armed.
extern std::atomic<int> armed;
void Hit(const char* name);
}  // namespace failpoint_internal

inline void Failpoint(const char* name) {
  if (failpoint_internal::armed.load(std::memory_order_relaxed) != 0) {
    failpoint_internal::Hit(name);
  }
}

}  // namespace ddp

#define DDP_FAILPOINT(name) ::ddp::Failpoint(name)

#endif  // DDP_COMMON_FAILPOINT_H_
