// Fault injector for crash tests, loaded into the coordinator with LD_PRELOAD:
// every fsync / fdatasync sleeps DDP_TEST_FSYNC_DELAY_MS (default 25) before
// the real call, as a slow disk would. That widens the window between a change
// in memory and its commit, where a kill -9 must not take back anything that
// was already sent to a client.

#include <dlfcn.h>
#include <time.h>

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

SyncFn Next(const char* name) {
  return reinterpret_cast<SyncFn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" int fsync(int fd) {
  static const SyncFn real = Next("fsync");
  Sleep();
  return real(fd);
}

extern "C" int fdatasync(int fd) {
  static const SyncFn real = Next("fdatasync");
  Sleep();
  return real(fd);
}
