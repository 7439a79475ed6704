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
// Revocation of open streams (issue 23): a job's token is replaced or revoked
// by SetJobTokenHash; calls check the token as they start, so a stream opened
// before would go on. A stream registers with WatchRevocation when it opens,
// and learns at once (on the thread that changes the token) that its
// credential is gone; it then ends with UNAUTHENTICATED.
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

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  // kJob: which of the job's tokens it was (each new token or revocation
  // counts one up), for WatchRevocation.
  uint64_t token_epoch = 0;
};

// SHA-256 of the token, hex.
std::string HashToken(absl::string_view token);
// 32 random bytes (the kernel's CSPRNG), URL-safe base64 without padding.
std::string NewToken();

class Authorizer {
 public:
  // Unregisters its callback when destroyed.
  class RevocationWatch {
   public:
    ~RevocationWatch();
    RevocationWatch(const RevocationWatch&) = delete;
    RevocationWatch& operator=(const RevocationWatch&) = delete;

   private:
    friend class Authorizer;
    RevocationWatch(const Authorizer* authorizer, uint64_t id) : authorizer_(authorizer), id_(id) {}
    const Authorizer* const authorizer_;
    const uint64_t id_;
  };

  // Empty admin token: authorization off (Authorize accepts everything).
  explicit Authorizer(absl::string_view admin_token);

  bool enabled() const { return enabled_; }
  // The job's token (replacing and so revoking any earlier one); empty
  // `token_hash`: the job has none (revoked).
  void SetJobTokenHash(const std::string& job_id, const std::string& token_hash);

  // The identity of an "authorization" header value ("Bearer T"; the scheme
  // in any case, RFC 7235).
  Identity Resolve(absl::string_view authorization) const;

  // Calls `revoked` once, with the UNAUTHENTICATED status the stream ends
  // with, when the token `identity` was resolved from stops being its job's
  // (a new token, a revocation, the job deleted). It runs on the thread that
  // changed the token, without the authorizer's lock; it may still run once
  // while the watch is being destroyed, so it must not touch what it watches
  // unless that is still alive (hold it by shared_ptr). Null for identities
  // that are never revoked (the admin, none). Possible errors:
  // UNAUTHENTICATED when the token was revoked already (after the call
  // started).
  absl::StatusOr<std::unique_ptr<RevocationWatch>> WatchRevocation(
      const Identity& identity, std::function<void(const absl::Status&)> revoked) const;
  // `target_job`: the job id (or KV namespace) the request names; empty when
  // it names none. Possible errors: UNAUTHENTICATED (no identity), NOT_FOUND
  // for an unknown method, PERMISSION_DENIED (out of scope); each message
  // names the method and what would be allowed, never a token.
  absl::Status Authorize(const Identity& identity, absl::string_view method,
                         absl::string_view target_job) const;

 private:
  const bool enabled_;
  const std::string admin_hash_;
  struct Watcher {
    std::string job_id;
    uint64_t token_epoch = 0;
    std::function<void(const absl::Status&)> revoked;
  };
  // The status of a stream whose token of `job_id` was revoked.
  static absl::Status RevokedError(absl::string_view job_id);

  mutable absl::Mutex mu_;
  std::map<std::string, std::string> job_by_hash_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> hash_by_job_ ABSL_GUARDED_BY(mu_);
  // The current token epoch of every job whose token ever changed.
  std::map<std::string, uint64_t> epoch_by_job_ ABSL_GUARDED_BY(mu_);
  mutable uint64_t next_watch_id_ ABSL_GUARDED_BY(mu_) = 1;
  mutable std::map<uint64_t, Watcher> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::auth

#endif  // DDP_COORDINATOR_AUTH_AUTHORIZER_H_
