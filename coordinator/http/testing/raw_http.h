#ifndef DDP_COORDINATOR_HTTP_TESTING_RAW_HTTP_H_
#define DDP_COORDINATOR_HTTP_TESTING_RAW_HTTP_H_

// Plain-socket HTTP/1.1 for tests that play hostile or careful clients of
// the coordinator's HTTP listener (and its connection gate): connections from
// a chosen loopback source address (all of 127/8 is local, so a test can be
// several clients), bytes sent exactly as given, replies read under a
// deadline.

#include <string>

#include "absl/time/time.h"

namespace ddp::http::testing {

// A TCP connection to 127.0.0.1:port from `source`; -1 on failure.
int ConnectFrom(int port, const std::string& source = "127.0.0.1");

// Sends all of `bytes`; false on error.
bool SendAll(int fd, const std::string& bytes);

// What arrives until the peer closes, `text` arrived (when not empty), or
// `bound` passed.
std::string ReadFor(int fd, absl::Duration bound, const std::string& text = "");

struct HttpAnswer {
  int status = 0;  // 0: no whole reply within the bound
  std::string body;
  absl::Duration took;
};

// Sends `method` `path` on a new connection from `source` ("Connection:
// close"), with a bearer token and a JSON body when given. Returns the socket
// to read the reply from (an event stream reads on), or -1.
int SendRequest(int port, const std::string& method, const std::string& path,
                const std::string& source = "127.0.0.1", const std::string& token = "",
                const std::string& body = "");

// The same, and its reply read until the server closes, within `bound`.
HttpAnswer Call(int port, const std::string& method, const std::string& path,
                const std::string& source = "127.0.0.1", const std::string& token = "",
                const std::string& body = "", absl::Duration bound = absl::Seconds(3));

}  // namespace ddp::http::testing

#endif  // DDP_COORDINATOR_HTTP_TESTING_RAW_HTTP_H_
