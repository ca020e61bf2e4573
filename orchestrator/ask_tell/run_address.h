// Where a live run serves: RUN_DIR/address, written when its server listens and removed when
// it ends, so that `sextant ask`, `sextant tell` and clients (clients/python) find it.
#ifndef SEXTANT_ORCHESTRATOR_ASK_TELL_RUN_ADDRESS_H_
#define SEXTANT_ORCHESTRATOR_ASK_TELL_RUN_ADDRESS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace sextant {

// RUN_DIR/address holds one JSON object:
//   {"address": "127.0.0.1:PORT", "run_id": "...", "pid": N,
//    "tls_dir": "/abs/dir"            (with --tls-dir: dial TLS with its worker.pem/.key/.token)
//    "secret_file": "/abs/worker.secret"}  (without: local TCP with this bearer token)
struct RunAddress {
  std::string address;      // HOST:PORT to dial
  std::string run_id;       // the run's id (AskedTrial.run_id)
  int64_t pid = 0;          // the serving process
  std::string tls_dir;      // empty: loopback
  std::string secret_file;  // loopback: the worker secret's file
};

// RUN_DIR/address.
std::string RunAddressPath(const std::string& run_dir);

// Writes it atomically (a temporary file renamed over it), mode 0600. Internal naming the
// file on error.
absl::Status WriteRunAddress(const std::string& run_dir, const RunAddress& address);

// NotFound when the file is absent; DataLoss naming it when it does not parse.
absl::StatusOr<RunAddress> ReadRunAddress(const std::string& run_dir);

// Removes the file (no error when it is absent).
void RemoveRunAddress(const std::string& run_dir);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_ASK_TELL_RUN_ADDRESS_H_
