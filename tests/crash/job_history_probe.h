#ifndef DDP_TESTS_CRASH_JOB_HISTORY_PROBE_H_
#define DDP_TESTS_CRASH_JOB_HISTORY_PROBE_H_

// A job's history as clients outside a coordinator process see it, for the
// tests that restart the coordinator (kill -9) or fail it over: the events of
// gRPC WatchJob and of the REST gateway's Server-Sent Events stream (read with
// curl, as an operator would), and the event counters of /metrics. Plus a job
// that has a history: two fake agents that run generation 1, lose a worker
// and run generation 2. SeeHistory and HistoryDifferences take and compare
// the whole picture before and after.
//
// Thread-safety: plain functions; a RestartedJob belongs to one thread.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/session/testing/fake_agent.h"
#include "ddp/v1/jobs.pb.h"

namespace ddp::testing {

// Job `job_id` of two nodes (fake agents on `address`) through generation 1,
// a worker failure (exit code 3 on node-1) and the group restart into
// generation 2. The heartbeat timeout is 60 s: while the agents stay away
// after a restart of the coordinator nothing new happens to the job.
class RestartedJob {
 public:
  RestartedJob(const std::string& address, std::string job_id);
  // Possible errors: DEADLINE_EXCEEDED naming the step that did not happen.
  absl::Status Run(absl::Duration timeout);

 private:
  const std::string job_id_;
  std::vector<std::unique_ptr<session::testing::FakeAgent>> agents_;
};

// GetJob, retried while the coordinator is not reachable yet (up to `timeout`).
absl::StatusOr<v1::Job> GetJobWhenServing(const std::string& address, const std::string& job_id,
                                          absl::Duration timeout);

// WatchJob from `from_index` until event `through_index` arrived (then the
// call is cancelled). Possible errors: the stream's, DEADLINE_EXCEEDED.
absl::StatusOr<std::vector<v1::JobEvent>> WatchJobEvents(const std::string& address,
                                                         const std::string& job_id,
                                                         int64_t from_index, int64_t through_index,
                                                         absl::Duration timeout);

// `curl -N http://127.0.0.1:PORT/v1/jobs/JOB:watch?from_index=N`: the data
// lines (JSON, in order) of its first `count` events; an `event: error`
// before them is returned as the error it carries.
absl::StatusOr<std::vector<std::string>> SseEventData(int http_port, const std::string& job_id,
                                                      int64_t from_index, size_t count,
                                                      absl::Duration timeout);

// The samples of the counters built from job events (ddp_restarts_total by
// cause, ddp_worker_failures_total, ddp_node_losses_total,
// ddp_generations_opened_total) in a scrape of /metrics, as text lines.
absl::StatusOr<std::vector<std::string>> EventCounterSamples(int http_port);

// The port a coordinator wrote to its --http-port-file, waiting for the file.
absl::StatusOr<int> ReadPortFile(const std::string& path, absl::Duration timeout);

// Job `job_id`'s history as the clients of one coordinator see it: GetJob
// (GetJobWhenServing), WatchJob from index 1 through the job's last event,
// the same from the SSE stream of the HTTP port the coordinator wrote to
// `http_port_file`, and its event counters (EventCounterSamples).
struct SeenHistory {
  v1::Job job;
  std::vector<std::string> watched;   // WatchJob's events, DebugString each
  std::vector<std::string> sse;       // the SSE stream's data lines
  std::vector<std::string> counters;  // /metrics sample lines
};
absl::StatusOr<SeenHistory> SeeHistory(const std::string& address,
                                       const std::string& http_port_file, const std::string& job_id,
                                       absl::Duration timeout);

// What `after` (the restarted or newly elected coordinator) shows otherwise
// than `before` did, one line per difference (empty: none): every event
// still kept (first index 1), the same last index, restart count and
// failures, the same events over WatchJob and SSE, the same event counters.
std::vector<std::string> HistoryDifferences(const SeenHistory& before, const SeenHistory& after);

}  // namespace ddp::testing

#endif  // DDP_TESTS_CRASH_JOB_HISTORY_PROBE_H_
