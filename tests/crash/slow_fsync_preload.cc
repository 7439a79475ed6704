// Fault injector for crash tests, loaded into the coordinator with LD_PRELOAD:
// - every fsync / fdatasync sleeps DDP_TEST_FSYNC_DELAY_MS (default 25) before
//   the real call, as a slow disk would. That widens the window between a
//   change in memory and its commit, where a kill -9 must not take back
//   anything that was already sent to a client;
// - while the file named by DDP_TEST_FSYNC_FAIL_FILE exists, every fsync /
//   fdatasync runs the real call and then reports EIO, as a failing disk (or an
//   ext4 shut down under the process) can: the data may well be on disk while
//   the caller is told it is not, so the outcome is unknown to it.

#include <dlfcn.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>

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

}  // namespace

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
