#ifndef DDP_TOOLS_KV_BENCH_REST_TARGET_H_
#define DDP_TOOLS_KV_BENCH_REST_TARGET_H_

// The coordinator's REST API (PUT/GET /v1/kv/{namespace}/{key}, POST ...:add)
// as a kv_bench target, to compare it with the gRPC methods it maps onto in
// the same run. HTTP/1.1 clients block, so each logical client has its own
// thread and keep-alive connection (as curl or Python's requests would).

#include <memory>
#include <string>

#include "tools/kv_bench/kv_targets.h"

namespace ddp::kv_bench {

// `address` is the HTTP listener's HOST:PORT.
std::unique_ptr<KvTarget> NewRestTarget(const std::string& address, const std::string& name_space);

}  // namespace ddp::kv_bench

#endif  // DDP_TOOLS_KV_BENCH_REST_TARGET_H_
