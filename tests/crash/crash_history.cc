#include "tests/crash/crash_history.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp::testing {
namespace {

class Violations {
 public:
  explicit Violations(size_t max) : max_(max) {}
  void Add(std::string line) {
    if (lines_.size() < max_) lines_.push_back(std::move(line));
  }
  std::vector<std::string> Take() { return std::move(lines_); }

 private:
  size_t max_;
  std::vector<std::string> lines_;
};

void CheckAckedPutsPresent(const CrashHistory& history, const FinalState& state, Violations& out) {
  for (const AckedWrite& write : history.acked) {
    if (write.is_add) continue;
    auto it = state.kvs.find(write.key);
    if (it == state.kvs.end()) {
      out.Add(absl::StrCat("acknowledged put of ", write.key, " (revision ", write.revision,
                           ") is missing"));
    } else if (it->second != write.value) {
      out.Add(absl::StrCat("acknowledged put of ", write.key, " has value '",
                           it->second.substr(0, 64), "', expected '", write.value.substr(0, 64),
                           "'"));
    }
  }
}

void CheckCounter(const CrashHistory& history, const FinalState& state, Violations& out) {
  int64_t acked_adds = 0;
  for (const AckedWrite& write : history.acked) acked_adds += write.is_add;
  if (state.counter < acked_adds) {
    out.Add(absl::StrCat("counter is ", state.counter, " but ", acked_adds,
                         " adds were acknowledged (lost adds)"));
  }
  if (state.counter > history.attempted_adds) {
    out.Add(absl::StrCat("counter is ", state.counter, " but only ", history.attempted_adds,
                         " adds were attempted"));
  }
}

void CheckPerClientOrder(const CrashHistory& history, Violations& out) {
  std::map<int, int64_t> last;
  for (const AckedWrite& write : history.acked) {
    auto [it, inserted] = last.emplace(write.client, write.revision);
    if (inserted) continue;
    if (write.revision <= it->second) {
      out.Add(absl::StrCat("client ", write.client, " got revision ", write.revision, " after ",
                           it->second));
    }
    it->second = write.revision;
  }
}

void CheckAcrossCrashes(const CrashHistory& history, Violations& out) {
  for (size_t k = 0; k < history.crashes.size(); ++k) {
    const Crash& crash = history.crashes[k];
    int64_t max_before = 0;
    int64_t min_after = std::numeric_limits<int64_t>::max();
    for (const AckedWrite& write : history.acked) {
      if (write.finished_ns < crash.killed_ns) {
        max_before = std::max(max_before, write.revision);
      }
      if (write.started_ns > crash.restarted_ns) {
        min_after = std::min(min_after, write.revision);
      }
    }
    if (min_after <= max_before) {
      out.Add(absl::StrCat("crash ", k,
                           ": a write after the restart got "
                           "revision ",
                           min_after, " <= ", max_before, " acknowledged before the kill"));
    }
    if (crash.status_revision_after < max_before) {
      out.Add(absl::StrCat("crash ", k, ": Status revision after restart ",
                           crash.status_revision_after, " < ", max_before,
                           " acknowledged before the kill"));
    }
  }
}

void CheckWatch(const CrashHistory& history, Violations& out) {
  std::set<std::pair<int64_t, std::string>> seen;
  int64_t last = 0;
  for (const WatchedEvent& event : history.watched) {
    if (event.revision < last) {
      out.Add(absl::StrCat("watch event revision ", event.revision, " arrived after ", last));
    }
    last = std::max(last, event.revision);
    if (!seen.emplace(event.revision, event.key).second) {
      out.Add(absl::StrCat("watch event (", event.revision, ", ", event.key, ") delivered twice"));
    }
  }
  for (const AckedWrite& write : history.acked) {
    if (seen.count({write.revision, write.key}) == 0) {
      out.Add(absl::StrCat("watcher never saw acknowledged write of ", write.key, " at revision ",
                           write.revision));
    }
  }
}

}  // namespace

std::vector<std::string> FindViolations(const CrashHistory& history, const FinalState& state,
                                        size_t max_violations) {
  Violations out(max_violations);
  CheckAckedPutsPresent(history, state, out);
  CheckCounter(history, state, out);
  CheckPerClientOrder(history, out);
  CheckAcrossCrashes(history, out);
  CheckWatch(history, out);
  return out.Take();
}

}  // namespace ddp::testing
