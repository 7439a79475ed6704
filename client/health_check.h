#ifndef DDP_CLIENT_HEALTH_CHECK_H_
#define DDP_CLIENT_HEALTH_CHECK_H_

// The node's health checks, run by the agent before it registers for a job
// and again between generations (ddp-client --health-check, repeatable; the
// agent's side: client/agent/node_health_checks.h). Their results go with the
// Register; the coordinator stores them with the node and refuses a node whose
// check failed (proto/ddp/v1/nodes.proto). The time they take is the node's:
// spent before the node joins, or while it confirms its workers stopped.
//
// Forms of --health-check VALUE:
//   CMD                                  a shell command (sh -c); name "check-N",
//                                        timeout 60 s; exit status 0 passes (any
//                                        value not starting with name=, timeout=,
//                                        cmd= or builtin=)
//   name=NAME,timeout=DUR,cmd=CMD        the same, named; name and timeout are
//                                        optional, cmd= comes last (CMD may hold
//                                        commas)
//   builtin=disk[,min-free=BYTES]        free space in the log dir (default
//                                        1 GiB; suffixes K, M, G, T: 1024-based)
//   builtin=gpus                         the GPUs the node announces
//                                        (CUDA_VISIBLE_DEVICES, else
//                                        --nproc-per-node gpu) are device files
//                                        /dev/nvidiaN
//   builtin=gloo[,world-size=N]          a loopback all-reduce: PYTHON (the
//                                        workers' interpreter) runs
//                                        client/gloo_check.py with N ranks
//                                        (default 2, at most 64) in a gloo
//                                        group on lo; needs torch
//
// Every form takes timeout=DUR (builtins too; default 60 s).
//
// Thread-safety: pure functions, except RunHealthCheck, which starts a process
// and blocks until it ends or times out.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ddp::client {

inline constexpr int kMaxHealthChecks = 16;
inline constexpr int kMaxHealthCheckNameChars = 64;
inline constexpr absl::Duration kMaxHealthCheckTimeout = absl::Hours(1);
// A check's output beyond this is cut to its tail (the coordinator keeps 4 KiB).
inline constexpr size_t kMaxHealthCheckOutputBytes = 4096;

struct HealthCheckSpec {
  enum class Kind { kCommand, kDisk, kGpus, kGloo };
  Kind kind = Kind::kCommand;
  std::string name;
  absl::Duration timeout = absl::Seconds(60);
  std::string command;                        // kCommand
  int64_t min_free_bytes = int64_t{1} << 30;  // kDisk
  int gloo_world_size = 2;                    // kGloo
};

inline constexpr int kMaxGlooCheckWorldSize = 64;

// Parses one --health-check value; `index` (from 1) names an unnamed command
// ("check-1"). INVALID_ARGUMENT naming the flag, the value and what is
// expected: an empty command, an unknown key or builtin, a name that is not
// 1-64 of [A-Za-z0-9_.-], a timeout outside (0, 1h], a world-size outside
// [1, 64] or given to another check than builtin=gloo.
absl::StatusOr<HealthCheckSpec> ParseHealthCheck(absl::string_view flag, absl::string_view value,
                                                 int index);

// What a built-in check looks at.
struct HealthCheckEnvironment {
  std::string log_dir;               // kDisk: where the free space is measured
  std::string cuda_visible_devices;  // kGpus: "0,1" (empty: use announced_gpus)
  int announced_gpus = 0;            // kGpus: GPUs 0..N-1 when no list is given
  std::string device_dir = "/dev";   // kGpus: where nvidiaN is looked for
  std::string python = "python3";    // kGloo: the interpreter (with torch)
};

struct HealthCheckOutcome {
  std::string name;
  bool passed = false;
  // The command's stdout and stderr (its tail), or what the built-in saw.
  std::string output;
  absl::Duration took;
};

// Runs `spec`: a command (or builtin=gloo's interpreter) in its own process
// group (killed with it at the timeout: a failure), or a built-in. `clock`
// times it.
HealthCheckOutcome RunHealthCheck(const HealthCheckSpec& spec, const HealthCheckEnvironment& env,
                                  const Clock& clock);

}  // namespace ddp::client

#endif  // DDP_CLIENT_HEALTH_CHECK_H_
