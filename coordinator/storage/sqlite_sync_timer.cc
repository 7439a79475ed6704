#include "coordinator/storage/sqlite_sync_timer.h"

#include <sqlite3.h>

#include <atomic>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"

namespace ddp::storage {

// The VFS: SQLite's record of it (base.pAppData points back here).
struct SqliteSyncTimerVfs {
  sqlite3_vfs base;
  sqlite3_vfs* real;  // the default VFS
  std::string name;   // base.zName
  std::function<void(SyncedFile, absl::Duration)> on_sync;
  const Clock* clock;
};

namespace {

// The file SQLite allocates (szOsFile bytes): ours first, the default VFS's
// file right behind it.
struct TimedFile {
  sqlite3_file base;
  sqlite3_file* real;
  const SqliteSyncTimerVfs* vfs;
  SyncedFile kind;
};

sqlite3_file* Real(sqlite3_file* file) { return reinterpret_cast<TimedFile*>(file)->real; }

// Every method but xSync forwards to the default VFS's file. A real file
// whose methods are of an older version than ours answers the newer ones as
// "not supported".
int Close(sqlite3_file* f) {
  sqlite3_file* real = Real(f);
  const int rc = real->pMethods != nullptr ? real->pMethods->xClose(real) : SQLITE_OK;
  f->pMethods = nullptr;
  return rc;
}
int Read(sqlite3_file* f, void* buffer, int amount, sqlite3_int64 offset) {
  return Real(f)->pMethods->xRead(Real(f), buffer, amount, offset);
}
int Write(sqlite3_file* f, const void* buffer, int amount, sqlite3_int64 offset) {
  return Real(f)->pMethods->xWrite(Real(f), buffer, amount, offset);
}
int Truncate(sqlite3_file* f, sqlite3_int64 size) {
  return Real(f)->pMethods->xTruncate(Real(f), size);
}
int FileSize(sqlite3_file* f, sqlite3_int64* size) {
  return Real(f)->pMethods->xFileSize(Real(f), size);
}
int Lock(sqlite3_file* f, int level) { return Real(f)->pMethods->xLock(Real(f), level); }
int Unlock(sqlite3_file* f, int level) { return Real(f)->pMethods->xUnlock(Real(f), level); }
int CheckReservedLock(sqlite3_file* f, int* out) {
  return Real(f)->pMethods->xCheckReservedLock(Real(f), out);
}
int FileControl(sqlite3_file* f, int op, void* arg) {
  return Real(f)->pMethods->xFileControl(Real(f), op, arg);
}
int SectorSize(sqlite3_file* f) { return Real(f)->pMethods->xSectorSize(Real(f)); }
int DeviceCharacteristics(sqlite3_file* f) {
  return Real(f)->pMethods->xDeviceCharacteristics(Real(f));
}
int ShmMap(sqlite3_file* f, int page, int page_size, int extend, void volatile** out) {
  const sqlite3_io_methods* m = Real(f)->pMethods;
  if (m->iVersion < 2 || m->xShmMap == nullptr) return SQLITE_IOERR_SHMMAP;
  return m->xShmMap(Real(f), page, page_size, extend, out);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  const sqlite3_io_methods* m = Real(f)->pMethods;
  if (m->iVersion < 2 || m->xShmLock == nullptr) return SQLITE_IOERR_SHMLOCK;
  return m->xShmLock(Real(f), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) {
  const sqlite3_io_methods* m = Real(f)->pMethods;
  if (m->iVersion >= 2 && m->xShmBarrier != nullptr) m->xShmBarrier(Real(f));
}
int ShmUnmap(sqlite3_file* f, int delete_flag) {
  const sqlite3_io_methods* m = Real(f)->pMethods;
  if (m->iVersion < 2 || m->xShmUnmap == nullptr) return SQLITE_OK;
  return m->xShmUnmap(Real(f), delete_flag);
}
int Fetch(sqlite3_file* f, sqlite3_int64 offset, int amount, void** out) {
  const sqlite3_io_methods* m = Real(f)->pMethods;
  if (m->iVersion < 3 || m->xFetch == nullptr) {
    *out = nullptr;  // SQLite reads the page instead
    return SQLITE_OK;
  }
  return m->xFetch(Real(f), offset, amount, out);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 offset, void* p) {
  const sqlite3_io_methods* m = Real(f)->pMethods;
  if (m->iVersion < 3 || m->xUnfetch == nullptr) return SQLITE_OK;
  return m->xUnfetch(Real(f), offset, p);
}

// The VFS-level calls go to the default VFS unchanged.
const SqliteSyncTimerVfs& TimerVfs(sqlite3_vfs* vfs) {
  return *static_cast<const SqliteSyncTimerVfs*>(vfs->pAppData);
}
sqlite3_vfs* RealVfs(sqlite3_vfs* vfs) { return TimerVfs(vfs).real; }
int Delete(sqlite3_vfs* vfs, const char* name, int sync_dir) {
  return RealVfs(vfs)->xDelete(RealVfs(vfs), name, sync_dir);
}
int Access(sqlite3_vfs* vfs, const char* name, int flags, int* out) {
  return RealVfs(vfs)->xAccess(RealVfs(vfs), name, flags, out);
}
int FullPathname(sqlite3_vfs* vfs, const char* name, int size, char* out) {
  return RealVfs(vfs)->xFullPathname(RealVfs(vfs), name, size, out);
}
void* DlOpen(sqlite3_vfs* vfs, const char* name) {
  return RealVfs(vfs)->xDlOpen(RealVfs(vfs), name);
}
void DlError(sqlite3_vfs* vfs, int size, char* out) {
  RealVfs(vfs)->xDlError(RealVfs(vfs), size, out);
}
void (*DlSym(sqlite3_vfs* vfs, void* handle, const char* symbol))(void) {
  return RealVfs(vfs)->xDlSym(RealVfs(vfs), handle, symbol);
}
void DlClose(sqlite3_vfs* vfs, void* handle) { RealVfs(vfs)->xDlClose(RealVfs(vfs), handle); }
int Randomness(sqlite3_vfs* vfs, int size, char* out) {
  return RealVfs(vfs)->xRandomness(RealVfs(vfs), size, out);
}
int Sleep(sqlite3_vfs* vfs, int microseconds) {
  return RealVfs(vfs)->xSleep(RealVfs(vfs), microseconds);
}
int CurrentTime(sqlite3_vfs* vfs, double* out) {
  return RealVfs(vfs)->xCurrentTime(RealVfs(vfs), out);
}
int GetLastError(sqlite3_vfs* vfs, int size, char* out) {
  return RealVfs(vfs)->xGetLastError(RealVfs(vfs), size, out);
}
int CurrentTimeInt64(sqlite3_vfs* vfs, sqlite3_int64* out) {
  return RealVfs(vfs)->xCurrentTimeInt64(RealVfs(vfs), out);
}

int Sync(sqlite3_file* f, int flags) {
  TimedFile* file = reinterpret_cast<TimedFile*>(f);
  const Clock& clock = *file->vfs->clock;
  const absl::Time start = clock.Now();
  const int rc = file->real->pMethods->xSync(file->real, flags);
  file->vfs->on_sync(file->kind, clock.Now() - start);
  return rc;
}

int Open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  static const sqlite3_io_methods kMethods = {3,
                                              Close,
                                              Read,
                                              Write,
                                              Truncate,
                                              Sync,
                                              FileSize,
                                              Lock,
                                              Unlock,
                                              CheckReservedLock,
                                              FileControl,
                                              SectorSize,
                                              DeviceCharacteristics,
                                              ShmMap,
                                              ShmLock,
                                              ShmBarrier,
                                              ShmUnmap,
                                              Fetch,
                                              Unfetch};
  TimedFile* ours = reinterpret_cast<TimedFile*>(file);
  ours->base.pMethods = nullptr;  // until the real file is open: SQLite closes nothing
  ours->real = reinterpret_cast<sqlite3_file*>(ours + 1);
  ours->real->pMethods = nullptr;
  ours->vfs = &TimerVfs(vfs);
  ours->kind = (flags & SQLITE_OPEN_MAIN_DB) != 0 ? SyncedFile::kDatabase
               : (flags & SQLITE_OPEN_WAL) != 0   ? SyncedFile::kWal
                                                  : SyncedFile::kOther;
  sqlite3_vfs* real = RealVfs(vfs);
  const int rc = real->xOpen(real, name, ours->real, flags, out_flags);
  if (ours->real->pMethods != nullptr) ours->base.pMethods = &kMethods;
  return rc;
}

// Each timer's VFS needs a name of its own.
std::atomic<int64_t> next_timer_id{1};

}  // namespace

const char* SyncedFileName(SyncedFile file) {
  switch (file) {
    case SyncedFile::kDatabase:
      return "database";
    case SyncedFile::kWal:
      return "wal";
    case SyncedFile::kOther:
      return "other";
  }
  return "other";
}

SqliteSyncTimer::SqliteSyncTimer(std::unique_ptr<SqliteSyncTimerVfs> vfs) : vfs_(std::move(vfs)) {}

absl::StatusOr<std::unique_ptr<SqliteSyncTimer>> SqliteSyncTimer::Register(
    SqliteSyncTiming timing) {
  if (!timing.on_sync) {
    return absl::InvalidArgumentError("SqliteSyncTiming.on_sync is empty: nothing to report to");
  }
  sqlite3_vfs* real = sqlite3_vfs_find(nullptr);
  if (real == nullptr) return absl::InternalError("SQLite has no default VFS to wrap");
  auto vfs = std::make_unique<SqliteSyncTimerVfs>();
  vfs->real = real;
  vfs->name = absl::StrCat("ddp-sync-timer-", next_timer_id.fetch_add(1));
  vfs->on_sync = std::move(timing.on_sync);
  vfs->clock = timing.clock != nullptr ? timing.clock : &MonotonicClock::Get();
  sqlite3_vfs& base = vfs->base;
  base = sqlite3_vfs{};
  // Version 2 at most: the system-call overrides of version 3 are for tests
  // of SQLite itself, and belong to the default VFS alone.
  base.iVersion = real->iVersion < 2 ? real->iVersion : 2;
  base.szOsFile = static_cast<int>(sizeof(TimedFile)) + real->szOsFile;
  base.mxPathname = real->mxPathname;
  base.zName = vfs->name.c_str();
  base.pAppData = vfs.get();
  base.xOpen = Open;
  base.xDelete = Delete;
  base.xAccess = Access;
  base.xFullPathname = FullPathname;
  base.xDlOpen = DlOpen;
  base.xDlError = DlError;
  base.xDlSym = DlSym;
  base.xDlClose = DlClose;
  base.xRandomness = Randomness;
  base.xSleep = Sleep;
  base.xCurrentTime = CurrentTime;
  base.xGetLastError = GetLastError;
  base.xCurrentTimeInt64 = CurrentTimeInt64;
  const int rc = sqlite3_vfs_register(&base, /*makeDflt=*/0);
  if (rc != SQLITE_OK) {
    return absl::InternalError(
        absl::StrCat("SQLite refused to register the VFS ", vfs->name, ": ", sqlite3_errstr(rc)));
  }
  return std::unique_ptr<SqliteSyncTimer>(new SqliteSyncTimer(std::move(vfs)));
}

SqliteSyncTimer::~SqliteSyncTimer() { sqlite3_vfs_unregister(&vfs_->base); }

const std::string& SqliteSyncTimer::vfs_name() const { return vfs_->name; }

}  // namespace ddp::storage
