#ifndef DDP_COMMON_VERSION_H_
#define DDP_COMMON_VERSION_H_

// The one version of ddp-coordinator's binaries (coordinator, ddp-client,
// ddpctl): `--version` prints it, the coordinator reports it in KV Status
// (`/v1/kv:status`) and in the ddp_build_info metric. The Python package's
// BASE_VERSION (python/source_version.py) follows it.

#include <string>

namespace ddp {

// "0.1.0".
inline constexpr char kVersion[] = "0.1.0";

// How this binary was compiled: "release" under `bazel build --config=release`
// (-c opt: NDEBUG, assertions off), else "development" (the default build that
// the tests use: -O2, assertions on).
const char* BuildMode();

// "PROGRAM 0.1.0 (release build)": the line `--version` prints.
std::string VersionLine(const std::string& program);

}  // namespace ddp

#endif  // DDP_COMMON_VERSION_H_
