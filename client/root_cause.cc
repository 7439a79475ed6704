#include "client/root_cause.h"

#include <string.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace ddp::client {
namespace {

constexpr int kRuleWidth = 60;

std::string SignalText(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev)
                           : absl::StrCat("SIG", signal);
}

std::string Cause(const WorkerFailure& f) {
  switch (f.kind) {
    case WorkerFailure::Kind::kExitCode:
      return absl::StrCat("exit code ", f.exit_code);
    case WorkerFailure::Kind::kSignal:
      return absl::StrCat("signal ", SignalText(f.signal));
    case WorkerFailure::Kind::kHang:
      return absl::StrCat("hang (no heartbeat for ",
                          absl::FormatDuration(f.silent_for), ")");
  }
  return "unknown";
}

void AppendEntry(int index, const WorkerFailure& f, std::string* out) {
  const std::string exitcode =
      f.kind == WorkerFailure::Kind::kExitCode ? absl::StrCat(f.exit_code)
      : f.kind == WorkerFailure::Kind::kSignal ? absl::StrCat(-f.signal)
                                               : std::string("hang");
  std::string traceback;
  if (!f.traceback.empty()) {
    traceback = f.traceback;
  } else if (!f.message.empty()) {
    traceback = f.message;
  } else if (f.kind == WorkerFailure::Kind::kSignal) {
    traceback = absl::StrCat("Signal ", f.signal, " (", SignalText(f.signal),
                             ") received by PID ", f.pid);
  } else if (f.kind == WorkerFailure::Kind::kHang) {
    traceback = absl::StrCat("no touch of DDP_HEARTBEAT_FILE for ",
                             absl::FormatDuration(f.silent_for));
  } else {
    traceback =
        "To enable traceback see: "
        "https://pytorch.org/docs/stable/elastic/errors.html";
  }
  // Continuation lines of a multi-line traceback line up under the first.
  traceback = absl::StrReplaceAll(traceback, {{"\n", "\n              "}});
  absl::StrAppend(
      out, "[", index, "]:\n", "  time      : ",
      absl::FormatTime("%Y-%m-%d_%H:%M:%S", f.time, absl::UTCTimeZone()), "\n",
      "  host      : ", f.node, "\n", "  rank      : ", f.global_rank,
      " (local_rank: ", f.local_rank, ")\n", "  exitcode  : ", exitcode,
      " (pid: ", f.pid, ")\n",
      "  error_file: ", f.error_file.empty() ? "<N/A>" : f.error_file, "\n",
      "  traceback : ", traceback, "\n");
}

}  // namespace

int RootCauseIndex(const std::vector<WorkerFailure>& failures) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(failures.size()); ++i) {
    if (best < 0 || failures[i].time < failures[best].time ||
        (failures[i].time == failures[best].time &&
         failures[i].global_rank < failures[best].global_rank)) {
      best = i;
    }
  }
  return best;
}

std::string OneLineFailure(const WorkerFailure& f) {
  std::string line =
      absl::StrCat(f.node, " rank ", f.global_rank, " (local_rank ",
                   f.local_rank, "): ", Cause(f));
  if (!f.message.empty()) {
    const std::string first_line = f.message.substr(0, f.message.find('\n'));
    absl::StrAppend(&line, ": ", first_line.substr(0, 512));
  }
  return line;
}

std::string FormatFailureSummary(const std::string& title,
                                 const std::vector<WorkerFailure>& failures) {
  const std::string heavy(kRuleWidth, '='), light(kRuleWidth, '-');
  std::string out =
      absl::StrCat(heavy, "\n", title, " FAILED\n", light, "\nFailures:\n");
  const int root = RootCauseIndex(failures);
  int shown = 0;
  for (int i = 0; i < static_cast<int>(failures.size()); ++i) {
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
