#ifndef DDP_CLIENT_STD_STREAMS_H_
#define DDP_CLIENT_STD_STREAMS_H_

// torchrun's `Std` syntax for --redirects / --tee: which of a worker's standard
// streams go to its log files.
//   "0" none, "1" stdout, "2" stderr, "3" both           -> the same for every
//   local rank "0:1,1:2"  (local_rank:value, comma separated)        -> per
//   local rank; ranks not named
//                                                             get kNone
//
// Thread-safety: plain values; const methods may be called concurrently.

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddp::client {

enum class Std : int { kNone = 0, kOut = 1, kErr = 2, kAll = 3 };

inline bool IncludesStdout(Std s) { return (static_cast<int>(s) & 1) != 0; }
inline bool IncludesStderr(Std s) { return (static_cast<int>(s) & 2) != 0; }

class StdSpec {
 public:
  StdSpec() = default;
  // Possible errors: INVALID_ARGUMENT (not "0".."3" nor "rank:value,..."; a
  // negative or repeated rank; the offending text is named, capped in length).
  static absl::StatusOr<StdSpec> Parse(absl::string_view text);

  // The setting for `local_rank`.
  Std ForRank(int local_rank) const;
  std::string ToString() const;

 private:
  bool uniform_ = true;
  Std all_ = Std::kNone;
  std::map<int, Std> per_rank_;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_STD_STREAMS_H_
