#include "coordinator/server/state_copy_command.h"

#include <sys/stat.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/server/data_dir_lock.h"
#include "coordinator/storage/etcd/etcd_state_store.h"
#include "coordinator/storage/etcd/etcd_store_spec.h"

namespace ddp::server {

absl::StatusOr<storage::StateCopySummary> CopyDataDirToStore(const std::string& data_dir,
                                                             const std::string& store) {
  DDP_ASSIGN_OR_RETURN(storage::EtcdStoreSpec spec, storage::ParseEtcdStoreSpec(store));
  // Opening a data dir without a database would make an empty one: refuse.
  const std::string db_path = absl::StrCat(data_dir, "/", kStateDatabase);
  struct stat st;
  if (stat(db_path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("no ", db_path,
                                            ": nothing to copy (give the --data-dir of the "
                                            "SQLite coordinator)"));
  }
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<DataDirLock> lock, DataDirLock::Acquire(data_dir));
  CoordinatorServerOptions source_options;
  source_options.data_dir = data_dir;
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<commit::StateStore> source,
                       CoordinatorServer::OpenStateStore(source_options));
  absl::StatusOr<std::unique_ptr<storage::EtcdStateStore>> target =
      storage::EtcdStateStore::Open(storage::EtcdTarget(spec.endpoints), spec.prefix);
  if (!target.ok()) {
    return absl::Status(target.status().code(),
                        absl::StrCat("cannot open ", store, ": ", target.status().message()));
  }
  return storage::CopyState(*source, **target);
}

}  // namespace ddp::server
