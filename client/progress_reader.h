#ifndef DDP_CLIENT_PROGRESS_READER_H_
#define DDP_CLIENT_PROGRESS_READER_H_

// The progress a node's workers report: each worker's DDP_PROGRESS_FILE,
// written (atomically, by rename) by ddp_coordinator.report_progress as the
// JSON of ddp.v1.WorkerProgress:
//
//   {"step": 1200, "metrics": {"loss": 0.31, "samples_per_s": 5120}}
//
// and, once the worker called report_checkpoint, its last checkpoint
// ("checkpoint_unix_ms", "checkpoint_step"), relayed as it is.
//
// The agent reads the files at most once per interval (a heartbeat carries a
// new report that often at most, so progress costs the coordinator a stream
// message per node every few seconds, not per heartbeat), dates each report
// by its file's modification time, and works out steps per second from two
// successive reports. A file that does not parse keeps the last good report.
//
// Thread-safety: not thread-safe (the agent guards it).

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "ddp/v1/jobs.pb.h"

namespace ddp::client {

class ProgressReader {
 public:
  struct Options {
    // How often the files are read at most.
    absl::Duration interval = absl::Seconds(5);
    // A larger file is not read (a worker writing something else there).
    size_t max_file_bytes = 16 << 10;
    // The coordinator's bounds (session/job_proto_convert.h): metrics beyond
    // them are dropped here (by name order), so a report is never refused.
    int max_metrics = 16;
    size_t max_metric_name_bytes = 64;
  };

  // `clock` tells the time on the files' clock (the wall clock).
  ProgressReader(const Clock& clock, Options options);

  // The files of a new generation's workers, by local rank; the earlier
  // reports are forgotten.
  void Reset(std::vector<std::string> files_by_local_rank);

  // Each worker's latest report, by local rank (nullopt: none yet); the files
  // are read again once the interval has passed since the last read. Each
  // report has local_rank, step, steps_per_second (0 until two reports were
  // seen), age_ms (from its file's time to when it was read: a report stays
  // the same between reads, so the heartbeats that repeat it can go as
  // datagrams) and the metrics.
  std::vector<std::optional<v1::WorkerProgress>> Latest();

 private:
  struct Worker {
    std::string file;
    std::optional<v1::WorkerProgress> report;
    absl::Time written;  // the report's file time
  };
  // Reads worker `w`'s file at `now`; keeps the last report when it is
  // missing, unchanged or does not parse.
  void Read(int local_rank, Worker& w, absl::Time now);

  const Clock& clock_;
  const Options options_;
  std::vector<Worker> workers_;
  std::optional<absl::Time> last_read_;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_PROGRESS_READER_H_
