#include "coordinator/auth/authorizer.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ddp::auth {
namespace {

constexpr char kNoCredentials[] =
    "no valid credentials: send 'authorization: Bearer TOKEN' (ddpctl and ddp-client: "
    "--token-file or DDP_TOKEN) with the admin token or the job's token";

// Constant-time equality of two hex digests of equal length.
bool SameHash(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

const std::vector<MethodRule>& MethodRules() {
  static const auto* rules = new std::vector<MethodRule>{
      {"/ddp.v1.KeyValueService/Put", Access::kJob},
      // Each put on the stream is authorized as a Put on its namespace.
      {"/ddp.v1.KeyValueService/PutStream", Access::kAuthenticated},
      {"/ddp.v1.KeyValueService/Get", Access::kJob},
      {"/ddp.v1.KeyValueService/Range", Access::kJob},
      {"/ddp.v1.KeyValueService/Delete", Access::kJob},
      {"/ddp.v1.KeyValueService/CompareAndSet", Access::kJob},
      {"/ddp.v1.KeyValueService/Add", Access::kJob},
      {"/ddp.v1.KeyValueService/Wait", Access::kJob},
      {"/ddp.v1.KeyValueService/Watch", Access::kJob},
      {"/ddp.v1.KeyValueService/LeaseGrant", Access::kAuthenticated},
      {"/ddp.v1.KeyValueService/LeaseKeepAlive", Access::kAuthenticated},
      {"/ddp.v1.KeyValueService/LeaseRevoke", Access::kAuthenticated},
      // A job's token lists and reads its own job's leases (KvStore filters).
      {"/ddp.v1.KeyValueService/LeaseList", Access::kAuthenticated},
      {"/ddp.v1.KeyValueService/LeaseTimeToLive", Access::kAuthenticated},
      {"/ddp.v1.KeyValueService/Compact", Access::kAdmin},
      {"/ddp.v1.KeyValueService/Snapshot", Access::kAdmin},
      {"/ddp.v1.KeyValueService/Status", Access::kAuthenticated},
      // A job's token lists its own namespace alone (GrpcKvService filters).
      {"/ddp.v1.KeyValueService/ListNamespaces", Access::kAuthenticated},
      {"/ddp.v1.ClusterService/GetClusterStatus", Access::kAuthenticated},
      {"/ddp.v1.JobService/CreateJob", Access::kAdmin},
      {"/ddp.v1.JobService/GetJob", Access::kJob},
      {"/ddp.v1.JobService/ListJobs", Access::kAuthenticated},
      {"/ddp.v1.JobService/WatchJob", Access::kJob},
      {"/ddp.v1.JobService/GetJobStacks", Access::kJob},
      {"/ddp.v1.JobService/UpdateJob", Access::kAdmin},
      {"/ddp.v1.JobService/CancelJob", Access::kAdmin},
      {"/ddp.v1.JobService/ExcludeNode", Access::kAdmin},
      {"/ddp.v1.JobService/DrainNode", Access::kAdmin},
      {"/ddp.v1.JobService/DeleteJob", Access::kAdmin},
      {"/ddp.v1.JobService/IssueJobToken", Access::kAdmin},
      {"/ddp.v1.SessionService/Session", Access::kJob},
      // The fleet: any identity reads it (a node id names no job); the
      // operator alone takes a node out or back.
      {"/ddp.v1.NodeService/ListNodes", Access::kAuthenticated},
      {"/ddp.v1.NodeService/GetNode", Access::kAuthenticated},
      {"/ddp.v1.NodeService/CordonNode", Access::kAdmin},
      {"/ddp.v1.NodeService/UncordonNode", Access::kAdmin},
      {"/ddp.v1.NodeService/GetQuarantinePolicy", Access::kAuthenticated},
      {"/ddp.v1.NodeService/SetQuarantinePolicy", Access::kAdmin},
  };
  return *rules;
}

std::string HashToken(absl::string_view token) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(token.data(), token.size(), digest, &length, EVP_sha256(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string NewToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) std::abort();  // no entropy: nothing safe to do
  return absl::WebSafeBase64Escape(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

Authorizer::Authorizer(absl::string_view admin_token)
    : enabled_(!admin_token.empty()),
      admin_hash_(admin_token.empty() ? "" : HashToken(admin_token)) {}

void Authorizer::SetJobTokenHash(const std::string& job_id, const std::string& token_hash) {
  std::vector<std::function<void(const absl::Status&)>> revoked;
  {
    absl::MutexLock lock(&mu_);
    std::string old_hash;
    if (auto old = hash_by_job_.find(job_id); old != hash_by_job_.end()) {
      old_hash = old->second;
      job_by_hash_.erase(old->second);
      hash_by_job_.erase(old);
    }
    if (!token_hash.empty()) {
      hash_by_job_[job_id] = token_hash;
      job_by_hash_[token_hash] = job_id;
    }
    if (old_hash != token_hash) {
      // Streams opened with the old token end now.
      const uint64_t epoch = ++epoch_by_job_[job_id];
      for (auto it = watchers_.begin(); it != watchers_.end();) {
        if (it->second.job_id == job_id && it->second.token_epoch < epoch) {
          revoked.push_back(std::move(it->second.revoked));
          it = watchers_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  if (revoked.empty()) return;
  const absl::Status error = RevokedError(job_id);
  for (auto& callback : revoked) callback(error);
}

absl::StatusOr<std::unique_ptr<Authorizer::RevocationWatch>> Authorizer::WatchRevocation(
    const Identity& identity, std::function<void(const absl::Status&)> revoked) const {
  if (identity.kind != Identity::Kind::kJob) return std::unique_ptr<RevocationWatch>();
  absl::MutexLock lock(&mu_);
  auto epoch = epoch_by_job_.find(identity.job_id);
  if (epoch != epoch_by_job_.end() && epoch->second != identity.token_epoch) {
    return RevokedError(identity.job_id);
  }
  const uint64_t id = next_watch_id_++;
  watchers_[id] = Watcher{identity.job_id, identity.token_epoch, std::move(revoked)};
  return std::unique_ptr<RevocationWatch>(new RevocationWatch(this, id));
}

Authorizer::RevocationWatch::~RevocationWatch() {
  absl::MutexLock lock(&authorizer_->mu_);
  authorizer_->watchers_.erase(id_);
}

absl::Status Authorizer::RevokedError(absl::string_view job_id) {
  return absl::UnauthenticatedError(absl::StrCat(
      "the token this stream was opened with was revoked (job '", job_id.substr(0, 128),
      "' has a new token, or none); open it again with the job's current token"));
}

Identity Authorizer::Resolve(absl::string_view authorization) const {
  // "Bearer" in any case (RFC 7235: auth schemes are case-insensitive), one
  // or more spaces, the token.
  absl::string_view header = absl::StripLeadingAsciiWhitespace(authorization);
  const size_t space = header.find(' ');
  if (space == absl::string_view::npos ||
      !absl::EqualsIgnoreCase(header.substr(0, space), "bearer")) {
    return Identity{};
  }
  absl::string_view token = absl::StripAsciiWhitespace(header.substr(space + 1));
  if (token.empty()) return Identity{};
  const std::string hash = HashToken(token);
  if (enabled_ && SameHash(hash, admin_hash_)) return Identity{Identity::Kind::kAdmin, ""};
  absl::MutexLock lock(&mu_);
  // The map's lookup compares hashes, not tokens: timing reveals nothing of a
  // token.
  auto it = job_by_hash_.find(hash);
  if (it == job_by_hash_.end()) return Identity{};
  auto epoch = epoch_by_job_.find(it->second);
  return Identity{Identity::Kind::kJob, it->second,
                  epoch == epoch_by_job_.end() ? 0 : epoch->second};
}

absl::Status Authorizer::Authorize(const Identity& identity, absl::string_view method,
                                   absl::string_view target_job) const {
  if (!enabled_) return absl::OkStatus();
  const MethodRule* rule = nullptr;
  for (const MethodRule& r : MethodRules()) {
    if (r.method == method) rule = &r;
  }
  if (rule == nullptr) {
    return absl::NotFoundError(absl::StrCat("no authorization rule for method ", method));
  }
  if (identity.kind == Identity::Kind::kNone) {
    return absl::UnauthenticatedError(absl::StrCat(method, ": ", kNoCredentials));
  }
  if (identity.kind == Identity::Kind::kAdmin) return absl::OkStatus();
  switch (rule->access) {
    case Access::kAuthenticated:
      return absl::OkStatus();
    case Access::kJob:
      if (target_job == identity.job_id) return absl::OkStatus();
      return absl::PermissionDeniedError(
          absl::StrCat(method, ": the token of job '", identity.job_id,
                       "' gives access to that job (and the key namespace of that name) only, "
                       "not to '",
                       target_job.substr(0, 64), "'"));
    case Access::kAdmin:
      break;
  }
  return absl::PermissionDeniedError(
      absl::StrCat(method, ": needs the admin token (--admin-token-file); the token of job '",
                   identity.job_id, "' may not call it"));
}

}  // namespace ddp::auth
