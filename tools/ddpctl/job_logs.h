#ifndef DDP_TOOLS_DDPCTL_JOB_LOGS_H_
#define DDP_TOOLS_DDPCTL_JOB_LOGS_H_

// `ddpctl jobs logs JOB [--rank R] [--generation G]`: the worker output the
// coordinator keeps with a job's failures (the last lines of each failed
// worker's stderr, its Python traceback, where its whole stderr is).
//
// Thread-safety: pure functions.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ddp/v1/jobs.pb.h"

namespace ddp::ddpctl {

struct JobLogsFilter {
  std::optional<int64_t> global_rank;
  std::optional<int64_t> generation;
};

// The failures to show: with no filter the root cause (the newest failure
// when the job has none); with one, every retained failure that matches,
// oldest first. NOT_FOUND (naming the filter) when nothing matches.
absl::StatusOr<std::vector<v1::Failure>> SelectFailureLogs(const v1::Job& job,
                                                           const JobLogsFilter& filter);

// One block a failure: its FailureText line, "logs: NODE:PATH", the
// traceback and the stderr tail (each said to be absent when it is).
std::string FailureLogsText(const std::vector<v1::Failure>& failures);

}  // namespace ddp::ddpctl

#endif  // DDP_TOOLS_DDPCTL_JOB_LOGS_H_
