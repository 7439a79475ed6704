#include "tests/tls/test_certs.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ddp::testing {
namespace {

absl::Status Run(const std::string& dir, const std::string& command) {
  const std::string log = dir + "/openssl.log";
  const std::string line = absl::StrCat("cd '", dir, "' && ", command, " >>'", log, "' 2>&1");
  if (std::system(line.c_str()) == 0) return absl::OkStatus();
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  return absl::UnavailableError(absl::StrCat("openssl failed: ", command, "\n", text.str()));
}

}  // namespace

absl::Status MakeTestPki(const std::string& dir, const std::string& name, TestPki* pki) {
  mkdir(dir.c_str(), 0755);
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  std::ofstream(dir + "/server.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                     << "extendedKeyUsage=serverAuth\n";
  std::ofstream(dir + "/client.ext") << "extendedKeyUsage=clientAuth\n";
  for (const std::string& command : {
           absl::StrCat("openssl req -x509 ", ec,
                        " -keyout ca.key -out ca.crt -days 2 -subj /CN=", name),
           absl::StrCat("openssl req ", ec, " -keyout server.key -out server.csr -subj /CN=server"),
           std::string("openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key "
                       "-CAcreateserial -out server.crt -days 2 -extfile server.ext"),
           absl::StrCat("openssl req ", ec, " -keyout client.key -out client.csr -subj /CN=client"),
           std::string("openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key "
                       "-CAcreateserial -out client.crt -days 2 -extfile client.ext"),
       }) {
    DDP_RETURN_IF_ERROR(Run(dir, command));
  }
  *pki = TestPki{dir,
                 dir + "/ca.crt",
                 dir + "/ca.key",
                 dir + "/server.crt",
                 dir + "/server.key",
                 dir + "/client.crt",
                 dir + "/client.key"};
  return absl::OkStatus();
}

}  // namespace ddp::testing
