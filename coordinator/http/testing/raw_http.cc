#include "coordinator/http/testing/raw_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ddp::http::testing {

int ConnectFrom(int port, const std::string& source) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

std::string ReadFor(int fd, absl::Duration bound, const std::string& text) {
  std::string got;
  const absl::Time deadline = absl::Now() + bound;
  char chunk[4096];
  while (absl::Now() < deadline) {
    if (!text.empty() && got.find(text) != std::string::npos) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10) <= 0) continue;
    const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) break;
    got.append(chunk, static_cast<size_t>(n));
  }
  return got;
}

int SendRequest(int port, const std::string& method, const std::string& path,
                const std::string& source, const std::string& token, const std::string& body) {
  const int fd = ConnectFrom(port, source);
  if (fd < 0) return -1;
  std::string request =
      absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
  if (!token.empty()) absl::StrAppend(&request, "Authorization: Bearer ", token, "\r\n");
  if (method != "GET") {
    absl::StrAppend(&request, "Content-Type: application/json\r\nContent-Length: ", body.size(),
                    "\r\n");
  }
  absl::StrAppend(&request, "\r\n", body);
  if (!SendAll(fd, request)) {
    close(fd);
    return -1;
  }
  return fd;
}

HttpAnswer Call(int port, const std::string& method, const std::string& path,
                const std::string& source, const std::string& token, const std::string& body,
                absl::Duration bound) {
  const absl::Time start = absl::Now();
  HttpAnswer answer;
  const int fd = SendRequest(port, method, path, source, token, body);
  if (fd < 0) return answer;
  const std::string reply = ReadFor(fd, bound);
  close(fd);
  answer.took = absl::Now() - start;
  if (absl::StartsWith(reply, "HTTP/1.1 ") && reply.size() > 12 && answer.took < bound) {
    answer.status = std::atoi(reply.substr(9, 3).c_str());
    const size_t head_end = reply.find("\r\n\r\n");
    if (head_end != std::string::npos) answer.body = reply.substr(head_end + 4);
  }
  return answer;
}

}  // namespace ddp::http::testing
