#ifndef DDP_CLIENT_WORKER_FILES_H_
#define DDP_CLIENT_WORKER_FILES_H_

// Where a worker's files live. Layout (torchrun's, with the generation as the
// attempt):
//
//   RUN_DIR = LOG_DIR/<job>_<random>            (one per agent run; torchrun:
//   <run_id>_<uuid>) RUN_DIR/attempt_<generation>/<local_rank>/
//       stdout.log  stderr.log   (only for streams that are redirected or teed)
//       error.json               (TORCHELASTIC_ERROR_FILE; written by torch's
//       @record) heartbeat                (DDP_HEARTBEAT_FILE; the worker
//       touches it) progress.json            (DDP_PROGRESS_FILE; the worker's
//       report_progress writes it)
//       stacks                   (DDP_STACK_DUMP_FILE; faulthandler writes
//       every thread's stack there on SIGUSR2, client/stack_dump.h)
//       ready_to_leave           (DDP_PREEMPTION_READY_FILE; the worker's
//       ready_to_leave() creates it after a preemption notice)
//   RUN_DIR/preemption_notice.json (DDP_PREEMPTION_NOTICE_FILE, every worker)
//
// Thread-safety: pure functions / plain values.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ddp::client {

struct WorkerFiles {
  std::string dir;
  std::string stdout_log;
  std::string stderr_log;
  std::string error_file;
  std::string heartbeat_file;
  std::string progress_file;  // DDP_PROGRESS_FILE (progress_reader.h)
  std::string stack_dump_file;
  // DDP_PREEMPTION_READY_FILE: ddp_coordinator.ready_to_leave() creates it
  // (client/preemption_notice.h).
  std::string ready_to_leave_file;
};

WorkerFiles WorkerFilesFor(const std::string& run_dir, int64_t generation, int local_rank);

// Creates RUN_DIR: `log_dir`/<job_id>_<random> (log_dir created if missing), or
// a fresh directory under $TMPDIR (default /tmp) named ddp_<job_id>_XXXXXX when
// `log_dir` is empty. Possible errors: INTERNAL (mkdir/mkdtemp failed; path and
// errno text named).
absl::StatusOr<std::string> MakeRunDirectory(const std::string& log_dir, const std::string& job_id);

// mkdir -p. Possible errors: INTERNAL (path and errno text named).
absl::Status MakeDirectories(const std::string& path);

}  // namespace ddp::client

#endif  // DDP_CLIENT_WORKER_FILES_H_
