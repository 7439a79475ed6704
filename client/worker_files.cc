#include "client/worker_files.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ddp::client {

WorkerFiles WorkerFilesFor(const std::string& run_dir, int64_t generation, int local_rank) {
  WorkerFiles files;
  // torchrun numbers attempts from 0 (attempt_<restart count>); generations
  // start at 1, and every generation gets its own folder (torchrun reuses one
  // after a membership change, overwriting its logs).
  files.dir =
      absl::StrCat(run_dir, "/attempt_", generation > 0 ? generation - 1 : 0, "/", local_rank);
  files.stdout_log = files.dir + "/stdout.log";
  files.stderr_log = files.dir + "/stderr.log";
  files.error_file = files.dir + "/error.json";
  files.heartbeat_file = files.dir + "/heartbeat";
  files.progress_file = files.dir + "/progress.json";
  files.stack_dump_file = files.dir + "/stacks";
  files.ready_to_leave_file = files.dir + "/ready_to_leave";
  return files;
}

absl::Status MakeDirectories(const std::string& path) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string prefix = path.substr(0, pos);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::InternalError(
          absl::StrCat("cannot create directory ", prefix, ": ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> MakeRunDirectory(const std::string& log_dir,
                                             const std::string& job_id) {
  std::string base = log_dir;
  if (base.empty()) {
    const char* tmp = getenv("TMPDIR");
    base = (tmp != nullptr && tmp[0] != '\0') ? tmp : "/tmp";
  } else if (absl::Status s = MakeDirectories(base); !s.ok()) {
    return s;
  }
  std::string pattern = absl::StrCat(base, log_dir.empty() ? "/ddp_" : "/", job_id, "_XXXXXX");
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create run directory ", pattern, ": ", strerror(errno)));
  }
  return std::string(buffer.data());
}

}  // namespace ddp::client
