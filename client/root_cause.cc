#include "client/root_cause.h"

#include <string.h>

#include <algorithm>
#include <numeric>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/activity_tracker.h"
#include "client/heartbeat_tracker.h"

namespace ddp::client {
namespace {

constexpr int kRuleWidth = 60;
// Of a stderr tail, the lines the summary shows when there is no traceback.
constexpr size_t kTailLinesShown = 10;

std::string SignalText(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : absl::StrCat("SIG", signal);
}

std::string HangText(const WorkerFailure& f) {
  if (f.silent_for <= absl::ZeroDuration()) return "hang";
  return absl::StrCat("hang: ",
                      f.idle ? DescribeIdleness(f.silent_for) : DescribeSilence(f.silent_for));
}

std::string Cause(const WorkerFailure& f) {
  switch (f.kind) {
    case WorkerFailure::Kind::kExitCode:
      return absl::StrCat("exit code ", f.exit_code);
    case WorkerFailure::Kind::kSignal:
      return absl::StrCat("signal ", SignalText(f.signal));
    case WorkerFailure::Kind::kHang:
      return f.knock_on_of_rank >= 0
                 ? absl::StrCat(HangText(f), " (knock-on of rank ", f.knock_on_of_rank, "'s hang)")
                 : HangText(f);
  }
  return "unknown";
}

// What the traceback line says when the worker left no error file.
std::string DefaultTraceback(const WorkerFailure& f) {
  switch (f.kind) {
    case WorkerFailure::Kind::kSignal:
      return f.pid > 0
                 ? absl::StrCat("Signal ", f.signal, " (", SignalText(f.signal),
                                ") received by PID ", f.pid)
                 : absl::StrCat("Signal ", f.signal, " (", SignalText(f.signal), ") received");
    case WorkerFailure::Kind::kHang:
      if (f.knock_on_of_rank >= 0) {
        return absl::StrCat(f.idle ? "idle" : "stopped touching DDP_HEARTBEAT_FILE", " after rank ",
                            f.knock_on_of_rank, " hung: blocked waiting for it (knock-on)");
      }
      return f.idle ? "the worker and its children used no CPU and moved no bytes, and were "
                      "stopped while they still ran"
                    : "the worker stopped touching DDP_HEARTBEAT_FILE and was stopped "
                      "while it still ran";
    case WorkerFailure::Kind::kExitCode:
      break;
  }
  // No error file and no traceback: the end of what it wrote on stderr says
  // more than torchrun's docs link.
  if (!f.stderr_tail.empty()) {
    std::vector<absl::string_view> lines =
        absl::StrSplit(absl::StripTrailingAsciiWhitespace(f.stderr_tail), '\n');
    const size_t first = lines.size() > kTailLinesShown ? lines.size() - kTailLinesShown : 0;
    return absl::StrCat("last lines of stderr:\n",
                        absl::StrJoin(lines.begin() + first, lines.end(), "\n"));
  }
  return "<N/A> (no error file, nothing on stderr)";
}

void AppendEntry(int index, const WorkerFailure& f, std::string* out) {
  const std::string exitcode = f.kind == WorkerFailure::Kind::kExitCode ? absl::StrCat(f.exit_code)
                               : f.kind == WorkerFailure::Kind::kSignal ? absl::StrCat(-f.signal)
                                                                        : HangText(f);
  // A message that only repeats the cause ("exit code 1", what agents send
  // when there was no error file) says no more than the exitcode line.
  const bool informative = !f.message.empty() && f.message != Cause(f);
  std::string traceback = !f.traceback.empty() ? f.traceback
                          : informative        ? f.message
                                               : DefaultTraceback(f);
  // Continuation lines of a multi-line traceback line up under the first.
  traceback = absl::StrReplaceAll(traceback, {{"\n", "\n              "}});
  absl::StrAppend(out, "[", index, "]:\n", "  time      : ",
                  absl::FormatTime("%Y-%m-%d_%H:%M:%S", f.time, absl::UTCTimeZone()), "\n",
                  "  host      : ", f.node, "\n", "  rank      : ", f.global_rank,
                  " (local_rank: ", f.local_rank, ")\n", "  exitcode  : ", exitcode,
                  f.pid > 0 ? absl::StrCat(" (pid: ", f.pid, ")") : std::string(), "\n",
                  "  error_file: ", f.error_file.empty() ? "<N/A>" : f.error_file, "\n",
                  "  traceback : ", traceback, "\n");
  if (!f.log_path.empty()) absl::StrAppend(out, "  logs      : ", f.node, ":", f.log_path, "\n");
}

bool Earlier(const WorkerFailure& a, const WorkerFailure& b) {
  if (a.time != b.time) return a.time < b.time;
  return a.global_rank < b.global_rank;
}

}  // namespace

int RootCauseIndex(const std::vector<WorkerFailure>& failures) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(failures.size()); ++i) {
    if (best < 0) {
      best = i;
      continue;
    }
    const bool knock_on = failures[i].knock_on_of_rank >= 0;
    const bool best_knock_on = failures[best].knock_on_of_rank >= 0;
    if (knock_on != best_knock_on) {
      if (best_knock_on) best = i;
      continue;
    }
    if (Earlier(failures[i], failures[best])) best = i;
  }
  return best;
}

std::string OneLineFailure(const WorkerFailure& f) {
  std::string line =
      absl::StrCat(f.node, " rank ", f.global_rank, " (local_rank ", f.local_rank, "): ", Cause(f));
  if (!f.message.empty()) {
    const std::string first_line = f.message.substr(0, f.message.find('\n'));
    absl::StrAppend(&line, ": ", first_line.substr(0, 512));
  }
  return line;
}

std::string FormatFailureSummary(const std::string& title,
                                 const std::vector<WorkerFailure>& failures, int root) {
  const std::string heavy(kRuleWidth, '='), light(kRuleWidth, '-');
  std::string out = absl::StrCat(heavy, "\n", title, " FAILED\n", light, "\nFailures:\n");
  if (root < 0 || root >= static_cast<int>(failures.size())) {
    root = RootCauseIndex(failures);
  }
  std::vector<int> order(failures.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return Earlier(failures[a], failures[b]); });
  int shown = 0;
  for (int i : order) {
    if (i == root) continue;
    AppendEntry(++shown, failures[i], &out);
  }
  if (shown == 0) out += "  <NO_OTHER_FAILURES>\n";
  absl::StrAppend(&out, light, "\nRoot Cause (first observed failure):\n");
  if (root >= 0) {
    AppendEntry(0, failures[root], &out);
  } else {
    out += "  <NO_FAILURES_RECORDED>\n";
  }
  absl::StrAppend(&out, heavy, "\n");
  return out;
}

}  // namespace ddp::client
