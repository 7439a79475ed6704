#ifndef DDP_COMMON_STATUS_MACROS_H_
#define DDP_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define DDP_RETURN_IF_ERROR(expr)                          \
  do {                                                     \
    ::absl::Status ddp_status_macro_ = (expr);             \
    if (!ddp_status_macro_.ok()) return ddp_status_macro_; \
  } while (false)

#endif  // DDP_COMMON_STATUS_MACROS_H_
