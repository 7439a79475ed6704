#ifndef DDP_COMMON_LOG_FILE_H_
#define DDP_COMMON_LOG_FILE_H_

// A second destination for DDP_LOG lines: a file that keeps more than the
// console shows. ddp-client keeps every INFO line of its own in
// RUN_DIR/agent.log while its terminal shows only warnings and errors.
//
//   console (stderr): lines at or above SetMinLogLevel's level (logging.h);
//   file:             lines at or above SetLogFile's level.
//
// MinLogLevel() (what DDP_LOG checks before formatting) is the lower of the
// two while a file is set.

#include "common/logging.h"

namespace ddp {

// Also writes every line at or above `level` to `fd` (one write per line; the
// caller keeps `fd` open until it calls SetLogFile(-1, ...)). fd < 0: no file.
void SetLogFile(int fd, LogLevel level);

}  // namespace ddp

#endif  // DDP_COMMON_LOG_FILE_H_
