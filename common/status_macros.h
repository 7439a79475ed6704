#ifndef DDP_COMMON_STATUS_MACROS_H_
#define DDP_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define DDP_RETURN_IF_ERROR(expr)                          \
  do {                                                     \
    ::absl::Status ddp_status_macro_ = (expr);             \
    if (!ddp_status_macro_.ok()) return ddp_status_macro_; \
  } while (false)

// `DDP_ASSIGN_OR_RETURN(T x, StatusOrExpr);` declares (or assigns) `x` from the
// value of an absl::StatusOr, or returns its status from the enclosing function.
#define DDP_STATUS_MACROS_CONCAT_INNER_(a, b) a##b
#define DDP_STATUS_MACROS_CONCAT_(a, b) DDP_STATUS_MACROS_CONCAT_INNER_(a, b)
#define DDP_ASSIGN_OR_RETURN(lhs, expr) \
  DDP_ASSIGN_OR_RETURN_IMPL_(DDP_STATUS_MACROS_CONCAT_(ddp_statusor_, __LINE__), lhs, expr)
#define DDP_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                               \
  if (!statusor.ok()) return statusor.status();         \
  lhs = std::move(statusor).value()

#endif  // DDP_COMMON_STATUS_MACROS_H_
