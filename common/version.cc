#include "common/version.h"

#include "absl/strings/str_cat.h"

namespace ddp {

const char* BuildMode() {
#ifdef NDEBUG
  return "release";
#else
  return "development";
#endif
}

std::string VersionLine(const std::string& program) {
  return absl::StrCat(program, " ", kVersion, " (", BuildMode(), " build)");
}

}  // namespace ddp
