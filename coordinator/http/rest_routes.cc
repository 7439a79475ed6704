#include "coordinator/http/rest_routes.h"

namespace ddp::http {
namespace {

constexpr char kJobs[] = "/ddp.v1.JobService/";
constexpr char kKv[] = "/ddp.v1.KeyValueService/";

RestRoute Unary(std::string verb, std::string path, std::string method, std::string body,
                std::string summary, std::string curl) {
  RestRoute r;
  r.http_method = std::move(verb);
  r.path = std::move(path);
  r.grpc_method = std::move(method);
  r.body = std::move(body);
  r.summary = std::move(summary);
  r.curl_example = std::move(curl);
  return r;
}

RestRoute Stream(std::string path, std::string method, std::string event_id_field,
                 std::string resume_field, std::string summary, std::string curl) {
  RestRoute r =
      Unary("GET", std::move(path), std::move(method), "", std::move(summary), std::move(curl));
  r.stream = true;
  r.event_id_field = std::move(event_id_field);
  r.resume_field = std::move(resume_field);
  return r;
}

std::vector<RestRoute> BuildRoutes() {
  const std::string j = kJobs;
  const std::string k = kKv;
  const std::string host = "http://localhost:29480";
  return {
      // The coordinators (answered by a standby too).
      Unary("GET", "/v1/cluster", "/ddp.v1.ClusterService/GetClusterStatus", "",
            "Which coordinator leads, this one's role, the etcd members' health",
            host + "/v1/cluster"),
      // The fleet: nodes across jobs (health ledger, cordon).
      Unary("GET", "/v1/nodes", "/ddp.v1.NodeService/ListNodes", "",
            "Every node the coordinator knows: state, incidents, health checks",
            host + "/v1/nodes"),
      Unary("POST", "/v1/nodes/{node_id}:cordon", "/ddp.v1.NodeService/CordonNode", "*",
            "Refuse a node to every job (admin)",
            "-X POST " + host + "/v1/nodes/node-7:cordon -d '{\"reason\":\"ECC errors\"}'"),
      Unary("POST", "/v1/nodes/{node_id}:uncordon", "/ddp.v1.NodeService/UncordonNode", "*",
            "Let a cordoned or quarantined node join jobs again (admin)",
            "-X POST " + host + "/v1/nodes/node-7:uncordon -d '{}'"),
      Unary("GET", "/v1/nodes:quarantinePolicy", "/ddp.v1.NodeService/GetQuarantinePolicy", "",
            "The cluster's quarantine policy (`setUnixMs` 0: the coordinator's flags)",
            host + "/v1/nodes:quarantinePolicy"),
      Unary("PUT", "/v1/nodes:quarantinePolicy", "/ddp.v1.NodeService/SetQuarantinePolicy", "*",
            "Set the quarantine policy: `after` incidents within `windowMs` (after 0: never; "
            "admin; stored, wins over the flags)",
            "-X PUT " + host +
                "/v1/nodes:quarantinePolicy -d '{\"after\":3,\"windowMs\":\"3600000\"}'"),
      Unary("GET", "/v1/nodes/{node_id}", "/ddp.v1.NodeService/GetNode", "",
            "A node: state and why, health checks with their output, incidents",
            host + "/v1/nodes/node-7"),
      // Jobs.
      Unary("GET", "/v1/jobs", j + "ListJobs", "",
            "List jobs; `?states=RUNNING&states=WAITING` filters by state",
            host + "/v1/jobs?states=RUNNING"),
      Unary("POST", "/v1/jobs", j + "CreateJob", "*", "Create a job with its settings",
            "-X POST " + host +
                "/v1/jobs -d '{\"jobId\":\"train-1\",\"settings\":{\"minNodes\":2,"
                "\"nprocPerNode\":8}}'"),
      Stream("/v1/jobs/{job_id}:watch", j + "WatchJob", "index", "from_index",
             "Job events as Server-Sent Events (`?from_index=N`, or Last-Event-ID to resume)",
             "-N " + host + "/v1/jobs/train-1:watch?from_index=1"),
      Unary("POST", "/v1/jobs/{job_id}:cancel", j + "CancelJob", "*",
            "Cancel a job: stop its workers, state CANCELLED",
            "-X POST " + host + "/v1/jobs/train-1:cancel -d '{\"reason\":\"preempted\"}'"),
      Unary("POST", "/v1/jobs/{job_id}:token", j + "IssueJobToken", "*",
            "Issue the job a new bearer token, the old one stops working (admin; "
            "`{\"revoke\":true}`: none)",
            "-X POST " + host + "/v1/jobs/train-1:token -d '{}'"),
      Unary("POST", "/v1/jobs/{job_id}:excludeNode", j + "ExcludeNode", "*",
            "Exclude a node: it leaves the job and may not rejoin",
            "-X POST " + host + "/v1/jobs/train-1:excludeNode -d '{\"nodeId\":\"node-7\"}'"),
      Unary("POST", "/v1/nodes/{node_id}:drain", j + "DrainNode", "*",
            "Drain a node: its jobs go on without it once their workers are ready, or after "
            "`grace_ms` (default 120000); no restart budget spent (`job_id` limits it to one job)",
            "-X POST " + host + "/v1/nodes/node-7:drain -d '{\"graceMs\":60000}'"),
      Unary("GET", "/v1/jobs/{job_id}:stacks", j + "GetJobStacks", "",
            "The Python stacks of a running job's workers, ranks grouped by identical stack "
            "(`?timeout_ms=` to wait for the nodes, default 5000)",
            host + "/v1/jobs/train-1:stacks"),
      Unary("GET", "/v1/jobs/{job_id}", j + "GetJob", "",
            "A job: state, generation, members, spares, failures", host + "/v1/jobs/train-1"),
      Unary("PATCH", "/v1/jobs/{job_id}", j + "UpdateJob", "*",
            "Change min_nodes / max_nodes (scale the job)",
            "-X PATCH " + host + "/v1/jobs/train-1 -d '{\"minNodes\":2,\"maxNodes\":4}'"),
      Unary("DELETE", "/v1/jobs/{job_id}", j + "DeleteJob", "", "Forget a finished job",
            "-X DELETE " + host + "/v1/jobs/train-1"),
      // Key-value store. Keys in the path are text (percent-encoded), not base64.
      Unary("GET", "/v1/kv:status", k + "Status", "",
            "Store revision, key, lease and watcher counts", host + "/v1/kv:status"),
      Unary("GET", "/v1/kv:namespaces", k + "ListNamespaces", "",
            "The namespaces that hold keys, with their key counts (a job's token: its own)",
            host + "/v1/kv:namespaces"),
      Unary("POST", "/v1/kv:compact", k + "Compact", "*", "Forget history up to a revision",
            "-X POST " + host + "/v1/kv:compact -d '{\"revision\":\"100\"}'"),
      Stream("/v1/kv/{namespace}:watch", k + "Watch", "revision", "start_revision",
             "Changes under `?prefix=` as Server-Sent Events (`?start_revision=N`, or "
             "Last-Event-ID to resume)",
             "-N '" + host + "/v1/kv/train-1:watch?prefix=ckpt/&start_revision=1'"),
      Unary("POST", "/v1/kv/{namespace}:wait", k + "Wait", "*",
            "Block until every key exists (keys base64 in the body)",
            "-X POST " + host +
                "/v1/kv/train-1:wait -d '{\"keys\":[\"cmVhZHk=\"],"
                "\"timeoutMs\":\"5000\"}'"),
      Unary("POST", "/v1/kv/{namespace}/{key=**}:compareAndSet", k + "CompareAndSet", "*",
            "Set the key to `desired` if it holds `expected` (base64)",
            "-X POST " + host +
                "/v1/kv/train-1/leader:compareAndSet -d "
                "'{\"expected\":\"\",\"desired\":\"bm9kZS0x\"}'"),
      Unary("POST", "/v1/kv/{namespace}/{key=**}:add", k + "Add", "*",
            "Add `delta` to an integer key (a counter)",
            "-X POST " + host + "/v1/kv/train-1/step:add -d '{\"delta\":\"1\"}'"),
      Unary("GET", "/v1/kv/{namespace}/{key=**}", k + "Get", "",
            "Read one key (`?revision=N`: as it was at revision N)", host + "/v1/kv/train-1/step"),
      Unary("PUT", "/v1/kv/{namespace}/{key=**}", k + "Put", "*",
            "Write one key (value base64; `lease`, conditions as in PutRequest)",
            "-X PUT " + host + "/v1/kv/train-1/note -d '{\"value\":\"aGVsbG8=\"}'"),
      Unary("DELETE", "/v1/kv/{namespace}/{key=**}", k + "Delete", "",
            "Delete a key (`?prefix=true`: every key under it)",
            "-X DELETE " + host + "/v1/kv/train-1/note"),
      Unary("GET", "/v1/kv/{namespace}", k + "Range", "",
            "Keys under `?prefix=` in key order (`limit`, `start_after`, `keys_only`)",
            "'" + host + "/v1/kv/train-1?prefix=ckpt/&limit=100'"),
      Unary("POST", "/v1/leases", k + "LeaseGrant", "*", "Grant a lease of `ttlMs`",
            "-X POST " + host + "/v1/leases -d '{\"ttlMs\":\"10000\"}'"),
      Unary("POST", "/v1/leases/{lease}:keepAlive", k + "LeaseKeepAlive", "*", "Renew a lease",
            "-X POST " + host + "/v1/leases/42:keepAlive"),
      Unary("GET", "/v1/leases", k + "LeaseList", "", "The leases the caller may use, in id order",
            host + "/v1/leases"),
      Unary("GET", "/v1/leases/{lease}", k + "LeaseTimeToLive", "",
            "A lease's remaining and granted TTL (`?keys=true`: its keys)",
            "'" + host + "/v1/leases/42?keys=true'"),
      Unary("DELETE", "/v1/leases/{lease}", k + "LeaseRevoke", "",
            "Revoke a lease and delete its keys", "-X DELETE " + host + "/v1/leases/42"),
  };
}

}  // namespace

const std::vector<RestRoute>& RestRoutes() {
  static const std::vector<RestRoute>* routes = new std::vector<RestRoute>(BuildRoutes());
  return *routes;
}

}  // namespace ddp::http
