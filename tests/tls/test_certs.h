#ifndef DDP_TESTS_TLS_TEST_CERTS_H_
#define DDP_TESTS_TLS_TEST_CERTS_H_

// Test certificates made with the openssl command line (EC P-256): a CA, a
// server certificate for 127.0.0.1 and localhost (SAN), a client certificate.
// testonly.

#include <string>

#include "absl/status/status.h"

namespace ddp::testing {

struct TestPki {
  std::string dir;
  std::string ca_cert, ca_key;
  std::string server_cert, server_key;
  std::string client_cert, client_key;
};

// Makes a CA named `name` and its server and client certificates in `dir`
// (created). Possible errors: UNAVAILABLE when openssl is missing or fails
// (its output in the message).
absl::Status MakeTestPki(const std::string& dir, const std::string& name, TestPki* pki);

}  // namespace ddp::testing

#endif  // DDP_TESTS_TLS_TEST_CERTS_H_
