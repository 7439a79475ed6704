#ifndef DDP_CLIENT_WORKER_COMMAND_H_
#define DDP_CLIENT_WORKER_COMMAND_H_

// The argv of one worker (torchrun's config_from_args, plus the product's rule
// for executables):
//   --no-python            -> ENTRYPOINT [--local_rank=N] ARGS...
//   -m / --module          -> $PYTHON_EXEC -u -m ENTRYPOINT [--local_rank=N]
//   ARGS... ENTRYPOINT ends in .py -> $PYTHON_EXEC -u ENTRYPOINT
//   [--local_rank=N] ARGS... an executable file (a path with '/', or a name
//   found on PATH) -> run as it is anything else          -> under Python, as
//   torchrun always does
// `--local_rank=N` is torch.distributed.launch's argument, added only when
// use_env is false. Thread-safety: pure functions.

#include <functional>
#include <string>
#include <vector>

#include "client/launch_options.h"

namespace ddp::client {

// True when `entrypoint` names an executable regular file (directly or through
// PATH).
bool IsExecutableEntryPoint(const std::string& entrypoint);

// Whether the entry point runs under $PYTHON_EXEC (the rule above): --run-path,
// -m, a .py file, or anything that is not an executable file, unless
// --no-python.
bool RunsUnderPython(
    const LaunchOptions& options,
    const std::function<bool(const std::string&)>& is_executable = IsExecutableEntryPoint);

std::vector<std::string> BuildWorkerArgv(
    const LaunchOptions& options, int local_rank,
    const std::function<bool(const std::string&)>& is_executable = IsExecutableEntryPoint);

}  // namespace ddp::client

#endif  // DDP_CLIENT_WORKER_COMMAND_H_
