// Fault injector for crash tests, loaded into the coordinator with LD_PRELOAD:
// - every fsync / fdatasync sleeps DDP_TEST_FSYNC_DELAY_MS (default 25) before
//   the real call, as a slow disk would. That widens the window between a
//   change in memory and its commit, where a kill -9 must not take back
//   anything that was already sent to a client;
// - while the file named by DDP_TEST_FSYNC_FAIL_FILE exists, every fsync /
//   fdatasync runs the real call and then reports EIO, as a failing disk (or an
//   ext4 shut down under the process) can: the data may well be on disk while
//   the caller is told it is not, so the outcome is unknown to it;
// - while the file named by DDP_TEST_WAL_FULL_FILE exists, every write to a
//   SQLite write-ahead log (a file whose name ends in "-wal") fails with
//   ENOSPC, as a full disk: SQLite writes the WAL at COMMIT, so the COMMIT
//   fails with SQLITE_FULL.

#include <dlfcn.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using SyncFn = int (*)(int);

long DelayMs() {
  static const long delay = [] {
    const char* text = std::getenv("DDP_TEST_FSYNC_DELAY_MS");
    if (text == nullptr) return 25L;
    char* end = nullptr;
    long value = std::strtol(text, &end, 10);
    return (end != text && value >= 0 && value <= 10000) ? value : 25L;
  }();
  return delay;
}

void Sleep() {
  const long ms = DelayMs();
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

// True while the trigger file exists.
bool Failing() {
  static const char* const trigger = std::getenv("DDP_TEST_FSYNC_FAIL_FILE");
  return trigger != nullptr && access(trigger, F_OK) == 0;
}

int MaybeFail(int rc) {
  if (rc == 0 && Failing()) {
    errno = EIO;
    return -1;
  }
  return rc;
}

SyncFn Next(const char* name) { return reinterpret_cast<SyncFn>(dlsym(RTLD_NEXT, name)); }

// True while DDP_TEST_WAL_FULL_FILE exists and `fd` is a write-ahead log.
bool WalFull(int fd) {
  static const char* const trigger = std::getenv("DDP_TEST_WAL_FULL_FILE");
  if (trigger == nullptr || access(trigger, F_OK) != 0) return false;
  char link[64];
  char path[4096];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof(path) - 1);
  if (n < 4) return false;
  path[n] = '\0';
  return strcmp(path + n - 4, "-wal") == 0;
}

using PwriteFn = ssize_t (*)(int, const void*, size_t, off_t);

}  // namespace

extern "C" ssize_t pwrite64(int fd, const void* buffer, size_t count, off_t offset) {
  static const PwriteFn real = reinterpret_cast<PwriteFn>(dlsym(RTLD_NEXT, "pwrite64"));
  if (WalFull(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, buffer, count, offset);
}

extern "C" ssize_t pwrite(int fd, const void* buffer, size_t count, off_t offset) {
  static const PwriteFn real = reinterpret_cast<PwriteFn>(dlsym(RTLD_NEXT, "pwrite"));
  if (WalFull(fd)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, buffer, count, offset);
}

extern "C" int fsync(int fd) {
  static const SyncFn real = Next("fsync");
  Sleep();
  return MaybeFail(real(fd));
}

extern "C" int fdatasync(int fd) {
  static const SyncFn real = Next("fdatasync");
  Sleep();
  return MaybeFail(real(fd));
}
