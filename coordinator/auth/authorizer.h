#ifndef DDP_COORDINATOR_AUTH_AUTHORIZER_H_
#define DDP_COORDINATOR_AUTH_AUTHORIZER_H_

// Who may call what (issue 13, identity and authorization; the transport
// adapters call it, it knows nothing of gRPC or HTTP).
//
// Identities, from the bearer token of a call ("authorization: Bearer T"):
//   admin    the coordinator's --admin-token-file: every method;
//   job J    a token issued for job J: that job's sessions (Register and what
//            follows), reading and watching J, and the KV namespace named J;
//   none     no token, or one that names nobody (UNAUTHENTICATED).
// Tokens are kept only as SHA-256 hashes and compared in constant time; no
// message names a token.
//
// Every method of ddp.v1 has one rule in MethodRules() (a test checks the
// table against the services' descriptors):
//   kAdmin        admin only (job creation and scheduling, compaction);
//   kJob          admin, or the token of the job the request names (its
//                 job_id, or the KV namespace);
//   kAuthenticated any identity (ListJobs, filtered by the caller; leases,
//                 Status and GetClusterStatus, which name no job). A lease
//                 names its job itself: the KV service checks that a job's
//                 token acts only on its job's leases (kv/lease_ownership.h).
//
// Thread-safety: thread-safe.

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ddp::auth {

enum class Access { kAdmin, kJob, kAuthenticated };

struct MethodRule {
  absl::string_view method;  // "/ddp.v1.JobService/CreateJob"
  Access access;
};
const std::vector<MethodRule>& MethodRules();

struct Identity {
  enum class Kind { kNone, kAdmin, kJob };
  Kind kind = Kind::kNone;
  std::string job_id;  // kJob
};

// SHA-256 of the token, hex.
std::string HashToken(absl::string_view token);
// 32 random bytes (the kernel's CSPRNG), URL-safe base64 without padding.
std::string NewToken();

class Authorizer {
 public:
  // Empty admin token: authorization off (Authorize accepts everything).
  explicit Authorizer(absl::string_view admin_token);

  bool enabled() const { return enabled_; }
  // The job's token (replacing and so revoking any earlier one); empty
  // `token_hash`: the job has none (revoked).
  void SetJobTokenHash(const std::string& job_id, const std::string& token_hash);

  // The identity of an "authorization" header value ("Bearer T").
  Identity Resolve(absl::string_view authorization) const;
  // `target_job`: the job id (or KV namespace) the request names; empty when
  // it names none. Possible errors: UNAUTHENTICATED (no identity), NOT_FOUND
  // for an unknown method, PERMISSION_DENIED (out of scope); each message
  // names the method and what would be allowed, never a token.
  absl::Status Authorize(const Identity& identity, absl::string_view method,
                         absl::string_view target_job) const;

 private:
  const bool enabled_;
  const std::string admin_hash_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> job_by_hash_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> hash_by_job_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::auth

#endif  // DDP_COORDINATOR_AUTH_AUTHORIZER_H_
