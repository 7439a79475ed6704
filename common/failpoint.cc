#include "common/failpoint.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/call_once.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace ddp {
namespace failpoint_internal {

std::atomic<int> armed{-1};

namespace {

// Every failpoint the tree marks: an armed name outside this list is a typo.
constexpr const char* kKnown[] = {"commit_before_save", "commit_after_save",
                                  "deliver_between_batches", "workers_spawned"};

struct Action {
  enum class Kind { kCrash, kSleep } kind = Kind::kCrash;
  long long at_hit = 0;  // crash@N: the N-th hit; 0: every hit
  long long sleep_ms = 0;
  long long hits = 0;
};

absl::once_flag once;
absl::Mutex mu;
absl::flat_hash_map<std::string, Action>* actions = nullptr;  // leaked on purpose

[[noreturn]] void Refuse(const std::string& why) {
  std::fprintf(stderr, "DDP_FAILPOINTS: %s\n", why.c_str());
  std::fflush(stderr);
  _exit(2);
}

void Parse() {
  actions = new absl::flat_hash_map<std::string, Action>();
  const char* spec = std::getenv("DDP_FAILPOINTS");
  if (spec == nullptr || *spec == '\0') {
    armed.store(0);
    return;
  }
  for (absl::string_view term : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(term, absl::MaxSplits('=', 1));
    const std::string name(absl::StripAsciiWhitespace(kv.first));
    absl::string_view what = absl::StripAsciiWhitespace(kv.second);
    bool known = false;
    for (const char* k : kKnown) known = known || name == k;
    if (!known) Refuse("unknown failpoint '" + name + "' (see common/failpoint.h)");
    Action action;
    if (what == "crash") {
    } else if (absl::ConsumePrefix(&what, "crash@")) {
      if (!absl::SimpleAtoi(what, &action.at_hit) || action.at_hit < 1) {
        Refuse("'" + std::string(term) + "': crash@N needs N >= 1");
      }
    } else if (absl::ConsumePrefix(&what, "sleep(") && absl::ConsumeSuffix(&what, ")")) {
      action.kind = Action::Kind::kSleep;
      if (!absl::SimpleAtoi(what, &action.sleep_ms) || action.sleep_ms < 0) {
        Refuse("'" + std::string(term) + "': sleep(MS) needs MS >= 0");
      }
    } else {
      Refuse("'" + std::string(term) + "': the action is crash, crash@N or sleep(MS)");
    }
    (*actions)[name] = action;
  }
  armed.store(actions->empty() ? 0 : 1);
}

}  // namespace

void Hit(const char* name) {
  absl::call_once(once, Parse);
  if (armed.load() == 0) return;
  long long sleep_ms = 0;
  {
    absl::MutexLock lock(&mu);
    auto it = actions->find(name);
    if (it == actions->end()) return;
    Action& action = it->second;
    ++action.hits;
    if (action.kind == Action::Kind::kSleep) {
      sleep_ms = action.sleep_ms;
    } else if (action.at_hit == 0 || action.hits == action.at_hit) {
      const std::string line = std::string("failpoint ") + name + ": crash\n";
      (void)!write(STDERR_FILENO, line.data(), line.size());
      _exit(kFailpointExitCode);
    }
  }
  if (sleep_ms > 0) absl::SleepFor(absl::Milliseconds(sleep_ms));
}

}  // namespace failpoint_internal
}  // namespace ddp
