#include "coordinator/server/data_dir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ddp::server {
namespace {

absl::Status ErrnoError(const std::string& what, const std::string& path, int error) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(error)));
}

}  // namespace

absl::Status MakeDirectories(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("data directory path is empty");
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string part = path.substr(0, slash);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError("cannot create directory", part, errno);
    }
    if (slash == std::string::npos) break;
  }
  struct stat info;
  if (stat(path.c_str(), &info) != 0) return ErrnoError("cannot stat", path, errno);
  if (!S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a directory; pick another --data-dir"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DataDirLock>> DataDirLock::Acquire(const std::string& data_dir) {
  if (absl::Status made = MakeDirectories(data_dir); !made.ok()) return made;
  const std::string path = data_dir + "/LOCK";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot open lock file", path, errno);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char buffer[32] = {};
    const ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
    close(fd);
    if (error != EWOULDBLOCK) return ErrnoError("cannot lock", path, error);
    std::string holder(buffer, n > 0 ? static_cast<size_t>(n) : 0);
    holder = std::string(absl::StripAsciiWhitespace(holder));
    return absl::FailedPreconditionError(
        absl::StrCat("data directory ", data_dir, " is in use by another coordinator (pid ",
                     holder.empty() ? "unknown" : holder,
                     "); stop that coordinator or pass another --data-dir"));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    const int error = errno;
    close(fd);
    return ErrnoError("cannot write pid to", path, error);
  }
  return std::unique_ptr<DataDirLock>(new DataDirLock(path, fd));
}

DataDirLock::~DataDirLock() { close(fd_); }

}  // namespace ddp::server
