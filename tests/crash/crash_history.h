#ifndef DDP_TESTS_CRASH_CRASH_HISTORY_H_
#define DDP_TESTS_CRASH_CRASH_HISTORY_H_

// What a kill -9 test observed, and the checker that judges it. Plain C++ (no
// gRPC), so a unit test feeds it a fabricated history.
//
// The rules (FindViolations):
//  1. Every acknowledged put is present in the final state with its value.
//  2. acknowledged adds <= counter <= attempted adds.
//  3. Each client's acknowledged write revisions strictly increase.
//  4. Revisions never go backwards across a crash: every write acknowledged
//     before kill k has a smaller revision than every write started after
//     restart k; the Status revision read after restart k is >= all of them.
//  5. The (resumed) watcher saw events in non-decreasing revision order, no
//     (revision, key) twice, and every acknowledged write's (revision, key).
// Thread-safety: plain values; the test guards its copy with a mutex.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddp::testing {

struct AckedWrite {
  int client = 0;
  std::string key;
  std::string value;  // For puts; empty for adds.
  bool is_add = false;
  int64_t revision = 0;
  int64_t started_ns = 0;   // Monotonic clock, when the call was sent.
  int64_t finished_ns = 0;  // When the acknowledgement arrived.
};

struct WatchedEvent {
  std::string key;
  int64_t revision = 0;
};

struct Crash {
  int64_t killed_ns = 0;              // Just before SIGKILL.
  int64_t restarted_ns = 0;           // Once the new process serves.
  int64_t status_revision_after = 0;  // Status read after the restart.
};

struct CrashHistory {
  std::string counter_key;
  std::vector<AckedWrite> acked;  // In acknowledgement order.
  int64_t attempted_adds = 0;     // Every add sent, retries included.
  std::vector<Crash> crashes;
  std::vector<WatchedEvent> watched;  // In delivery order, across resumes.
};

struct FinalState {
  std::map<std::string, std::string> kvs;  // Every key of the namespace.
  int64_t counter = 0;
};

// Every rule broken, one readable line each (capped at `max_violations`);
// empty when the history is consistent.
std::vector<std::string> FindViolations(const CrashHistory& history, const FinalState& state,
                                        size_t max_violations = 20);

}  // namespace ddp::testing

#endif  // DDP_TESTS_CRASH_CRASH_HISTORY_H_
