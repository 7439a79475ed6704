#ifndef DDP_CLIENT_PREWARM_ORPHAN_REAPER_H_
#define DDP_CLIENT_PREWARM_ORPHAN_REAPER_H_

// Makes this process a child subreaper (PR_SET_CHILD_SUBREAPER) and reaps
// the orphans it inherits, so that the standbys a --prewarm zygote forks
// (standby_pool.h) are this process's own children: WorkerSupervisor
// waitpid()s them and gets their exit status, as for a worker it forked.
//
// A subreaper inherits every orphaned descendant, not only the standbys: a
// dead worker's data-loader children, a daemon a script left behind. Those
// would stay zombies (and keep a worker's process group "alive" for
// WorkerSupervisor::Stop) where init used to reap them. This thread reaps
// them without stealing anyone's exit status:
//
//   reaped: a zombie child that does not lead its process group, or that
//           leads its session (this process starts no such child: every
//           fork of the agent -- SpawnWorker, health_check,
//           standalone_coordinator -- makes its child lead a new group in
//           the agent's session, and waits for it by pid);
//   left:   a zombie group leader in this session (a worker or standby,
//           reaped by its owner with waitpid(pid)).
//
// Only an orphan that made itself a group leader without a new session
// (setpgid(0, 0), e.g. a shell's job) is left a zombie until this process
// ends.
//
// Cost: one waitid(P_ALL, WNOHANG | WNOWAIT) per poll_interval; the
// children's /proc files are read only when some child is a zombie. While
// the only zombies are ones it must leave (their owners reap them soon; a
// group leader no one waits for, never), the interval doubles up to
// max_poll_interval.
//
// Thread-safety: the object owns one thread ("orphan-reaper"); ReapOnce may
// be called from any thread. One reaper per process.

#include <sys/types.h>

#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ddp::client {

struct OrphanReaperOptions {
  // How often the thread looks for zombies: the longest an orphan of a
  // stopped worker holds up WorkerSupervisor::Stop (real time: a real
  // process's exit is waited for).
  absl::Duration poll_interval = absl::Milliseconds(10);
  absl::Duration max_poll_interval = absl::Milliseconds(320);
};

class OrphanReaper {
 public:
  // Possible errors: INTERNAL (prctl failed; errno text).
  static absl::StatusOr<std::unique_ptr<OrphanReaper>> Create(OrphanReaperOptions options = {});
  // Stops the thread, reaps once more and clears PR_SET_CHILD_SUBREAPER.
  ~OrphanReaper();
  OrphanReaper(const OrphanReaper&) = delete;
  OrphanReaper& operator=(const OrphanReaper&) = delete;

  // Reaps the zombies described above now; returns how many.
  int ReapOnce();
  // How many were reaped so far (diagnostics, tests).
  int reaped() const;

 private:
  struct Pass {
    bool zombies = false;  // some child was a zombie
    int reaped = 0;
  };
  explicit OrphanReaper(OrphanReaperOptions options);
  Pass ReapPass();
  void Loop();

  const OrphanReaperOptions options_;
  mutable absl::Mutex mu_;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  int reaped_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_PREWARM_ORPHAN_REAPER_H_
