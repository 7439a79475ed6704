#ifndef DDP_CLIENT_NCCL_UNIQUE_ID_H_
#define DDP_CLIENT_NCCL_UNIQUE_ID_H_

// The NCCL unique id of a generation, made by the group-rank-0 agent with
// ncclGetUniqueId (so NCCL's bootstrap root listens on this node, on the
// training network). NCCL is opened at run time with dlopen ("libnccl.so.2" on
// the default search path, then /usr/local/cuda/lib64/libnccl.so.2), so the
// agent runs on machines without NCCL too; it then sends no id and workers let
// NCCL bootstrap from MASTER_ADDR as usual. ncclGetUniqueId needs no GPU: it
// only opens the bootstrap root socket.
//
// Thread-safety: thread-safe (dlopen/dlsym are; the library handle is never
// closed).

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddp::client {

inline constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES

struct NcclLibraryOptions {
  std::vector<std::string> candidates = {"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"};
};

// Returns 128 raw bytes.
// Possible errors: NOT_FOUND (no candidate library loads, or it lacks
// ncclGetUniqueId: send no id), INTERNAL (ncclGetUniqueId returned an error
// code, named).
absl::StatusOr<std::string> GenerateNcclUniqueId(const NcclLibraryOptions& options = {});

// Lowercase hex (256 chars for an id).
std::string HexEncode(absl::string_view bytes);
// Possible errors: INVALID_ARGUMENT (odd length or a non-hex character;
// position named).
absl::StatusOr<std::string> HexDecode(absl::string_view hex);

}  // namespace ddp::client

#endif  // DDP_CLIENT_NCCL_UNIQUE_ID_H_
