#ifndef DDP_COORDINATOR_SERVER_DATA_DIR_LOCK_H_
#define DDP_COORDINATOR_SERVER_DATA_DIR_LOCK_H_

// An exclusive lock on a coordinator data directory: flock(2) on DATA_DIR/LOCK,
// which also records the holder's pid. The kernel drops the lock when the
// process dies, so a crashed coordinator never leaves a stale lock behind.
//
// Thread-safety: immutable after Acquire.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ddp::server {

class DataDirLock {
 public:
  // Creates `data_dir` (and parents) if needed and locks it.
  // Errors: FAILED_PRECONDITION when another process (or another server in this
  // one) holds the lock, naming the directory and the holder's pid; UNAVAILABLE
  // on I/O errors.
  static absl::StatusOr<std::unique_ptr<DataDirLock>> Acquire(const std::string& data_dir);
  ~DataDirLock();  // releases the lock
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  DataDirLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

// mkdir -p. Errors: UNAVAILABLE naming the path and errno text.
absl::Status MakeDirectories(const std::string& path);

}  // namespace ddp::server

#endif  // DDP_COORDINATOR_SERVER_DATA_DIR_LOCK_H_
