#include "client/hang_order.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace ddp::client {

int HangEvidenceClass(const HungWorker& worker) {
  if (worker.process_state == 'T' || worker.process_state == 't') return 1;
  if (worker.process_state == 'D') return 2;
  if (worker.cpu_progress) return 3;
  return 4;
}

std::string HangEvidence(const HungWorker& worker) {
  switch (HangEvidenceClass(worker)) {
    case 1:
      return absl::StrCat("process stopped (state ", std::string(1, worker.process_state),
                          ": SIGSTOP or a debugger)");
    case 2:
      return "process in uninterruptible wait (state D: stuck in the kernel, e.g. on I/O)";
    case 3:
      return "process busy (CPU time grows) without reaching its next heartbeat";
    default:
      return "";
  }
}

void OrderHungWorkers(std::vector<HungWorker>& hung) {
  std::sort(hung.begin(), hung.end(), [](const HungWorker& a, const HungWorker& b) {
    return std::make_tuple(HangEvidenceClass(a), a.last_touch, a.last_mtime, a.global_rank) <
           std::make_tuple(HangEvidenceClass(b), b.last_touch, b.last_mtime, b.global_rank);
  });
}

}  // namespace ddp::client
