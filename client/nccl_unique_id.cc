#include "client/nccl_unique_id.h"

#include <dlfcn.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddp::client {
namespace {

// ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId); ncclUniqueId is
// char[128].
using GetUniqueIdFn = int (*)(void*);

}  // namespace

absl::StatusOr<std::string> GenerateNcclUniqueId(const NcclLibraryOptions& options) {
  std::vector<std::string> errors;
  for (const std::string& candidate : options.candidates) {
    // RTLD_LOCAL keeps NCCL's symbols out of the agent; the handle stays open
    // for good, since NCCL's bootstrap thread may outlive the call.
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      errors.push_back(why != nullptr ? why : candidate);
      continue;
    }
    auto get_id = reinterpret_cast<GetUniqueIdFn>(dlsym(handle, "ncclGetUniqueId"));
    if (get_id == nullptr) {
      errors.push_back(absl::StrCat(candidate, ": no ncclGetUniqueId"));
      continue;
    }
    std::string id(kNcclUniqueIdBytes, '\0');
    const int result = get_id(id.data());
    if (result != 0) {
      return absl::InternalError(
          absl::StrCat("ncclGetUniqueId failed with ncclResult_t ", result,
                       " (2 = system error, e.g. no usable network interface; "
                       "set NCCL_SOCKET_IFNAME / "
                       "NCCL_DEBUG=INFO to see why)"));
    }
    return id;
  }
  return absl::NotFoundError(
      absl::StrCat("NCCL is not available, no unique id generated: ", absl::StrJoin(errors, "; ")));
}

std::string HexEncode(absl::string_view bytes) { return absl::BytesToHexString(bytes); }

absl::StatusOr<std::string> HexDecode(absl::string_view hex) {
  if (hex.size() % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hex text has odd length ", hex.size(), "; expected pairs of digits"));
  }
  for (size_t i = 0; i < hex.size(); ++i) {
    if (!absl::ascii_isxdigit(hex[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("non-hex character at position ", i, " of ", hex.size()));
    }
  }
  return absl::HexStringToBytes(hex);
}

}  // namespace ddp::client
