#include "tools/ddpctl/job_logs.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tools/ddpctl/output.h"

namespace ddp::ddpctl {
namespace {

std::string Indented(const std::string& text) {
  return absl::StrCat("  ", PrintableLines(text, "  "), "\n");
}

}  // namespace

absl::StatusOr<std::vector<v1::Failure>> SelectFailureLogs(const v1::Job& job,
                                                           const JobLogsFilter& filter) {
  std::vector<v1::Failure> selected;
  if (!filter.global_rank.has_value() && !filter.generation.has_value()) {
    if (job.has_root_cause() && !job.root_cause().node_id().empty()) {
      selected.push_back(job.root_cause());
    } else if (!job.failures().empty()) {
      selected.push_back(*job.failures().rbegin());
    }
  } else {
    for (const v1::Failure& f : job.failures()) {
      if (f.local_rank() < 0) continue;  // a lost node: no worker output
      if (filter.global_rank.has_value() && f.global_rank() != *filter.global_rank) continue;
      if (filter.generation.has_value() && f.generation() != *filter.generation) continue;
      selected.push_back(f);
    }
  }
  if (selected.empty()) {
    std::string what = "no failure";
    if (filter.global_rank.has_value()) absl::StrAppend(&what, " of rank ", *filter.global_rank);
    if (filter.generation.has_value()) {
      absl::StrAppend(&what, " in generation ", *filter.generation);
    }
    return absl::NotFoundError(absl::StrCat(
        "job ", job.job_id(), " has ", what,
        " among its retained failures (jobs get lists them; the coordinator keeps the newest ",
        "failures' output only)"));
  }
  return selected;
}

std::string FailureLogsText(const std::vector<v1::Failure>& failures) {
  std::string text;
  for (size_t i = 0; i < failures.size(); ++i) {
    const v1::Failure& f = failures[i];
    if (i > 0) text += "\n";
    absl::StrAppend(&text, FailureText(f), "\n");
    absl::StrAppend(&text, "logs: ",
                    f.log_path().empty() ? std::string("none recorded")
                                         : absl::StrCat(PrintableBytes(f.node_id()), ":",
                                                        PrintableBytes(f.log_path())),
                    "\n");
    absl::StrAppend(&text, "traceback:", f.traceback().empty() ? " none\n" : "\n");
    if (!f.traceback().empty()) absl::StrAppend(&text, Indented(f.traceback()));
    absl::StrAppend(&text, "stderr (last lines):", f.stderr_tail().empty() ? " none kept\n" : "\n");
    if (!f.stderr_tail().empty()) absl::StrAppend(&text, Indented(f.stderr_tail()));
  }
  return text;
}

}  // namespace ddp::ddpctl
