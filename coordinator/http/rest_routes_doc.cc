// Prints the REST route table as the Markdown that docs/api.md carries:
//   bazel run //coordinator/http:rest_routes_doc
// (coordinator_rest_test checks that the doc lists every route.)

#include <cstdio>

#include "coordinator/http/rest_routes.h"

int main() {
  std::printf("| Route | gRPC method | What it does |\n|---|---|---|\n");
  for (const ddp::http::RestRoute& route : ddp::http::RestRoutes()) {
    std::printf("| `%s %s` | `%s`%s | %s |\n", route.http_method.c_str(), route.path.c_str(),
                route.grpc_method.c_str(), route.stream ? " (SSE)" : "", route.summary.c_str());
  }
  std::printf("\n```sh\n");
  for (const ddp::http::RestRoute& route : ddp::http::RestRoutes()) {
    std::printf("curl -s %s\n", route.curl_example.c_str());
  }
  std::printf("```\n");
  return 0;
}
