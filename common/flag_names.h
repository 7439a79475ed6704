#ifndef DDP_COMMON_FLAG_NAMES_H_
#define DDP_COMMON_FLAG_NAMES_H_

// Abseil's flag parser knows only the underscore spelling of a flag
// (--data_dir); users type torchrun's dashes (--data-dir). NormalizeFlagNames
// rewrites the name part of every "--flag[=value]" argument (not the value,
// not the program name, and nothing after a bare "--" marker itself) so that
// both spellings work.
//
// Thread-safety: pure function.

#include <string>
#include <vector>

namespace ddp {

// Returns argv with dashes in flag names turned into underscores; the strings
// live in `storage`, which must outlive the result.
std::vector<char*> NormalizeFlagNames(int argc, char** argv, std::vector<std::string>* storage);

}  // namespace ddp

#endif  // DDP_COMMON_FLAG_NAMES_H_
