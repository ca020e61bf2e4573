#ifndef SEXTANT_COMMON_STATUS_MACROS_H_
#define SEXTANT_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns from the enclosing function when expr yields a non-OK absl::Status.
#define SEXTANT_RETURN_IF_ERROR(expr)        \
  do {                                       \
    ::absl::Status _sx_status = (expr);      \
    if (!_sx_status.ok()) return _sx_status; \
  } while (0)

#define SEXTANT_CONCAT_INNER_(a, b) a##b
#define SEXTANT_CONCAT_(a, b) SEXTANT_CONCAT_INNER_(a, b)

// Evaluates rexpr (an absl::StatusOr<T>); on error returns its status, otherwise moves the value
// into lhs, which may be a declaration: SEXTANT_ASSIGN_OR_RETURN(auto x, F());
#define SEXTANT_ASSIGN_OR_RETURN(lhs, rexpr) \
  SEXTANT_ASSIGN_OR_RETURN_IMPL_(SEXTANT_CONCAT_(_sx_statusor, __LINE__), lhs, rexpr)
#define SEXTANT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                   \
  if (!tmp.ok()) return std::move(tmp).status();        \
  lhs = std::move(tmp).value()

#endif  // SEXTANT_COMMON_STATUS_MACROS_H_
