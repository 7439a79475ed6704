#ifndef DDP_CLIENT_LAUNCHER_ERROR_FILE_H_
#define DDP_CLIENT_LAUNCHER_ERROR_FILE_H_

// The launcher's own TORCHELASTIC_ERROR_FILE. Schedulers (TorchX, SageMaker)
// set it for the launcher and read the job's root cause from it when the job
// fails; torchrun writes it there from its @record decorator, in the layout
// torch.distributed.elastic.multiprocessing.errors uses:
//   {"message": {"message": "...", "extraInfo": {"py_callstack": "...",
//                                                "timestamp": "1700000000"}}}
//
// Thread-safety: pure function (writes the file).

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ddp::client {

// Writes `message` (the root cause in one line) and `details` (the failure
// summary) to `path` atomically (temp file + rename). Errors: UNAVAILABLE when
// the file cannot be written (the message names it).
absl::Status WriteLauncherErrorFile(const std::string& path, const std::string& message,
                                    const std::string& details, absl::Time when);

// What torchrun's @record does when the first failure's worker wrote an error
// file (ErrorHandler.dump_error_file): copies that file's JSON to `path`,
// with "errorCode": `exit_code` added to its "message" object when the code
// is not 0 (torch's exitcode: -N for a signal) and "message" is an object (a
// plain-text "message" is copied unchanged, as torch does). Possible errors:
// NOT_FOUND (no worker file: write the summary instead), INVALID_ARGUMENT
// (the worker's file is not JSON; named), UNAVAILABLE (`path` unwritable).
absl::Status CopyWorkerErrorFile(const std::string& worker_file, int exit_code,
                                 const std::string& path);

}  // namespace ddp::client

#endif  // DDP_CLIENT_LAUNCHER_ERROR_FILE_H_
