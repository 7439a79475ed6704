#ifndef DDP_COMMON_TOKEN_FILE_H_
#define DDP_COMMON_TOKEN_FILE_H_

// A bearer token kept in a file (one line; surrounding white space ignored).
// Messages name the flag and the file, never the contents.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddp {

inline constexpr size_t kMinTokenBytes = 16;
inline constexpr size_t kMaxTokenBytes = 4096;

// Possible errors: INVALID_ARGUMENT (unreadable, empty, shorter than
// kMinTokenBytes, longer than kMaxTokenBytes, or with white space inside).
absl::StatusOr<std::string> ReadTokenFile(absl::string_view flag, const std::string& path);

}  // namespace ddp

#endif  // DDP_COMMON_TOKEN_FILE_H_
